// Attention for the GPU (`attention-kernel`, as kiln-to-gpu runs it): the
// forward pass becomes kiln.flash_attention and the backward pass, given
// the forward output, kiln.flash_attention_grad, whose kernels
// kiln-gpu-kernels builds (test/Codegen/GPU/flash-attention.mlir). Their
// inits are fresh tensors shaped like the query, key and value; an i1 mask
// is passed as it is (the kernels read bytes). Heads wider than 128, and a
// gradient without the forward output, stay on whole scores.
// RUN: kiln-opt %s -convert-kiln-to-linalg="attention-kernel=true" -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    %[[Q:.*]]: tensor<?x?x8xf32>, %[[K:.*]]: tensor<?x?x4xf32>, %[[M:.*]]: tensor<?x?xi1>, %[[S:.*]]: i64)
// CHECK-NOT:     linalg.generic
// CHECK:         %[[INIT:.*]] = tensor.empty(%{{.*}}, %{{.*}}) : tensor<?x?x8xf32>
// CHECK:         %[[O:.*]] = kiln.flash_attention ins(%[[Q]], %[[K]], %[[K]] : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) mask(%[[M]] : tensor<?x?xi1>) seed(%[[S]]) outs(%[[INIT]] : tensor<?x?x8xf32>) {causal, dropout = 1.000000e-01 : f64, num_heads = 4 : i64, num_kv_heads = 2 : i64, stream = 3 : i64} -> tensor<?x?x8xf32>
// CHECK:         return %[[O]]
func.func @forward(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %m: tensor<?x?xi1>, %s: i64) -> tensor<?x?x8xf32> {
  %0 = kiln.attention %q, %k, %k mask %m seed %s {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal, dropout = 0.1 : f64, stream = 3 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?xi1>, i64) -> tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// -----

// CHECK-LABEL: func.func @backward(
// CHECK-SAME:    %[[G:.*]]: tensor<?x?x8xf32>, %[[Q:.*]]: tensor<?x?x8xf32>, %[[K:.*]]: tensor<?x?x8xf32>, %[[O:.*]]: tensor<?x?x8xf32>)
// CHECK-DAG:     %[[DQ:.*]] = tensor.empty({{.*}}) : tensor<?x?x8xf32>
// CHECK:         %[[R:.*]]:3 = kiln.flash_attention_grad ins(%[[G]], %[[Q]], %[[K]], %[[K]], %[[O]] : {{.*}}) outs(%[[DQ]], %{{.*}}, %{{.*}} : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {num_heads = 2 : i64, num_kv_heads = 2 : i64} -> tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
// CHECK:         return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @backward(%g: tensor<?x?x8xf32>, %q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>, %o: tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %0:3 = kiln.attention_grad %g, %q, %k, %k output %o {num_heads = 2 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  return %0#0, %0#1, %0#2 : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// Without the forward output the gradient needs each row's Σ dP·P first:
// whole scores.
// CHECK-LABEL: func.func @backward_without_output(
// CHECK-NOT:     kiln.flash_attention_grad
// CHECK:         linalg.generic
func.func @backward_without_output(%g: tensor<?x?x8xf32>, %q: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %0:3 = kiln.attention_grad %g, %q, %k, %k {num_heads = 2 : i64}
      : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  return %0#0 : tensor<?x?x8xf32>
}

// -----

// Heads of 129: wider than the kernels' tiles take.
// CHECK-LABEL: func.func @wide_heads(
// CHECK-NOT:     kiln.flash_attention
// CHECK:         linalg.generic
func.func @wide_heads(%q: tensor<?x?x258xf32>) -> tensor<?x?x258xf32> {
  %0 = kiln.attention %q, %q, %q {num_heads = 2 : i64} : (tensor<?x?x258xf32>, tensor<?x?x258xf32>, tensor<?x?x258xf32>) -> tensor<?x?x258xf32>
  return %0 : tensor<?x?x258xf32>
}

// -----

// A cached decoder's queries at `offset`: the keys and values are cut to
// the filled prefix (offset + Tq positions), so the kernel's queries sit at
// the end of its keys.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %[[Q:.*]]: tensor<?x1x8xf32>, %[[C:.*]]: tensor<?x40x8xf32>, %[[P:.*]]: i64)
// CHECK:         %[[POS:.*]] = arith.index_cast %[[P]] : i64 to index
// CHECK:         %[[LEN:.*]] = arith.addi %[[POS]], %c1
// CHECK:         %[[PREFIX:.*]] = tensor.extract_slice %[[C]][0, 0, 0] [%{{.*}}, %[[LEN]], 8] [1, 1, 1] : tensor<?x40x8xf32> to tensor<?x?x8xf32>
// CHECK:         kiln.flash_attention ins(%[[Q]], %[[PREFIX]], %{{.*}} : tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) outs(%{{.*}} : tensor<?x1x8xf32>) {causal, num_heads = 2 : i64, num_kv_heads = 2 : i64}
func.func @decode(%q: tensor<?x1x8xf32>, %c: tensor<?x40x8xf32>, %pos: i64) -> tensor<?x1x8xf32> {
  %0 = kiln.attention %q, %c, %c offset %pos {num_heads = 2 : i64, causal}
      : (tensor<?x1x8xf32>, tensor<?x40x8xf32>, tensor<?x40x8xf32>, i64) -> tensor<?x1x8xf32>
  return %0 : tensor<?x1x8xf32>
}
