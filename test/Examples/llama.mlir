// The Llama example, shrunk to seconds: it trains, saves Hugging Face's
// layout, reloads it through the loader to the same validation loss and
// samples with the key/value cache; a checkpoint already there is replaced
// only when asked.
// RUN: rm -rf %t && mkdir -p %t
// RUN: kiln-example-llama --steps 12 --sample 40 --out %t/hf | FileCheck %s
// RUN: FileCheck %s --check-prefix=CONFIG < %t/hf/config.json
// RUN: not kiln-example-llama --steps 1 --out %t/hf 2>&1 | FileCheck %s --check-prefix=EXISTS
// RUN: kiln-example-llama --steps 2 --sample 0 --out %t/hf --overwrite | FileCheck %s --check-prefix=AGAIN

// CHECK: model: Llama, vocab 65, d_model 64, 2 layers, 4 query heads over 2 key/value heads, d_ff 176, context 64
// CHECK: step 12/12 | loss
// CHECK: saved {{.*}}hf/config.json and {{.*}}hf/model.safetensors
// CHECK-NOT: note:
// CHECK: validation loss: trained [[LOSS:[0-9.]+]], reloaded [[LOSS]]
// CHECK: sample:
// CHECK-NEXT: ROMEO:

// CONFIG-DAG: "model_type": "llama"
// CONFIG-DAG: "architectures": [
// CONFIG-DAG: "LlamaForCausalLM"
// CONFIG-DAG: "num_attention_heads": 4
// CONFIG-DAG: "num_key_value_heads": 2
// CONFIG-DAG: "hidden_act": "silu"
// CONFIG-DAG: "tie_word_embeddings": false
// CONFIG-DAG: "rope_scaling": null

// EXISTS: error: {{.*}}hf/config.json exists: pass --overwrite to replace it, or another --out

// AGAIN: validation loss: trained [[AGAIN:[0-9.]+]], reloaded [[AGAIN]]
