// The example programs build, compile and run their models.
// RUN: kiln-example-gpt | FileCheck %s --check-prefix=GPT
// RUN: kiln-example-bert-embeddings | FileCheck %s --check-prefix=BERT
// RUN: kiln-example-transformer | FileCheck %s --check-prefix=TRANSFORMER
// RUN: kiln-example-tiny-lm | FileCheck %s --check-prefix=TINY

// gpt-tiny has BENCHMARKS.md's parameter count and runs two batch shapes
// through one compiled function; the first position's logits do not depend
// on the batch.
// GPT: gpt-tiny: V=65 d=128 heads=4 layers=4 d_ff=512, 818048 parameters
// GPT: idx [1, 8] -> logits [1, 8, 65]
// GPT-NEXT: logits[0, 0, :4] = [[[ROW:.+]]]
// GPT: idx [2, 5] -> logits [2, 5, 65]
// GPT-NEXT: logits[0, 0, :4] = [[[ROW]]]

// LayerNorm output: zero mean, unit variance per position, [PAD] included.
// BERT: input_ids [1, 7] -> embeddings [1, 7, 16]
// BERT: position 0 {{.*}}var 1.0000)
// BERT: position 5 {{.*}}var 1.0000)

// log_softmax rows are distributions.
// TRANSFORMER: src [2, 5] (+ mask), tgt [2, 4] -> log-probabilities [2, 4, 60]
// TRANSFORMER: sum of probabilities 1.00000

// TINY: [1, 3, 256]
