// The README's main example: the hand-written GPT block verifies, and its
// evaluation form has no dropout left while attention, the feed-forward
// block and the tied head remain.
// RUN: kiln-opt %S/../../examples/gpt/gpt_tiny_block.mlir | FileCheck %s --check-prefix=TRAIN
// RUN: kiln-opt %S/../../examples/gpt/gpt_tiny_block.mlir --kiln-strip-dropout --canonicalize | FileCheck %s --check-prefix=EVAL

// TRAIN-LABEL: func.func @gpt_tiny_loss
// TRAIN-COUNT-3: kiln.dropout
// TRAIN: kiln.cross_entropy

// EVAL-LABEL: func.func @gpt_tiny_loss
// EVAL-NOT: kiln.dropout
// EVAL: kiln.mha {{.*}} {causal, num_heads = 4 : i64, stream = 1 : i64}
// EVAL-NOT: kiln.dropout
// EVAL: kiln.ffn gelu
// EVAL-NOT: kiln.dropout
// EVAL: kiln.linear %{{.+}}, %arg3 : (tensor<?x?x128xf32>, tensor<65x128xf32>) -> tensor<?x?x65xf32>
// EVAL: kiln.cross_entropy
