// kiln-widen-bf16: every kiln op on bf16 tensors computes in f32 between
// casts; ops that only move elements, constants and casts stay as they are;
// f32 ops are untouched.
// RUN: kiln-opt %s -kiln-widen-bf16 | FileCheck %s
// RUN: kiln-opt %s -kiln-widen-bf16 -canonicalize | FileCheck %s --check-prefix=FOLD
// RUN: kiln-opt %s -kiln-widen-bf16=rounding-products=true -canonicalize | FileCheck %s --check-prefix=ROUND

// CHECK-LABEL: func.func @block
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x8xbf16>, %[[W:[^:]*]]: tensor<4x8xf32>
// CHECK: %[[WB:.*]] = kiln.cast %[[W]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: %[[XW:.*]] = kiln.cast %[[X]] : (tensor<?x8xbf16>) -> tensor<?x8xf32>
// CHECK: %[[WW:.*]] = kiln.cast %[[WB]] : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK: %[[H:.*]] = kiln.linear %[[XW]], %[[WW]] : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
// CHECK: %[[HB:.*]] = kiln.cast %[[H]] : (tensor<?x4xf32>) -> tensor<?x4xbf16>
// CHECK: %[[T:.*]] = kiln.transpose %[[HB]] {{.*}} : (tensor<?x4xbf16>) -> tensor<4x?xbf16>
// CHECK: %[[TW:.*]] = kiln.cast %[[T]] : (tensor<4x?xbf16>) -> tensor<4x?xf32>
// CHECK: %[[G:.*]] = kiln.gelu %[[TW]] : (tensor<4x?xf32>) -> tensor<4x?xf32>
// CHECK: %[[GB:.*]] = kiln.cast %[[G]] : (tensor<4x?xf32>) -> tensor<4x?xbf16>
// CHECK: %[[R:.*]] = kiln.relu %[[P:.*]] : (tensor<3xf32>) -> tensor<3xf32>
// CHECK: return %[[GB]], %[[R]]
func.func @block(%x: tensor<?x8xbf16>, %w: tensor<4x8xf32>, %p: tensor<3xf32>)
    -> (tensor<4x?xbf16>, tensor<3xf32>) {
  %wb = kiln.cast %w : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %h = kiln.linear %x, %wb : (tensor<?x8xbf16>, tensor<4x8xbf16>) -> tensor<?x4xbf16>
  %t = kiln.transpose %h [1, 0] : (tensor<?x4xbf16>) -> tensor<4x?xbf16>
  %g = kiln.gelu %t : (tensor<4x?xbf16>) -> tensor<4x?xbf16>
  %r = kiln.relu %p : (tensor<3xf32>) -> tensor<3xf32>
  return %g, %r : tensor<4x?xbf16>, tensor<3xf32>
}

// A bf16 value widened and rounded back folds away (bf16 -> f32 -> bf16 is
// exact); f32 -> bf16 -> f32 does not (it rounds).
// FOLD-LABEL: func.func @chain
// FOLD: %[[A:.*]] = kiln.cast %{{.*}} : (tensor<8xbf16>) -> tensor<8xf32>
// FOLD-NEXT: %[[B:.*]] = kiln.exp %[[A]] : (tensor<8xf32>) -> tensor<8xf32>
// FOLD-NEXT: %[[C:.*]] = kiln.cast %[[B]] : (tensor<8xf32>) -> tensor<8xbf16>
// FOLD-NEXT: %[[D:.*]] = kiln.cast %[[C]] : (tensor<8xbf16>) -> tensor<8xf32>
// FOLD-NEXT: %[[E:.*]] = kiln.log %[[D]] : (tensor<8xf32>) -> tensor<8xf32>
// FOLD-NEXT: %[[F:.*]] = kiln.cast %[[E]] : (tensor<8xf32>) -> tensor<8xbf16>
// FOLD-NEXT: return %[[F]]
func.func @chain(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = kiln.exp %x : (tensor<8xbf16>) -> tensor<8xbf16>
  %1 = kiln.log %0 : (tensor<8xbf16>) -> tensor<8xbf16>
  return %1 : tensor<8xbf16>
}

// FOLD-LABEL: func.func @round_trip
// FOLD-SAME: (%[[X:.*]]: tensor<8xbf16>)
// FOLD-NEXT: return %[[X]]
func.func @round_trip(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = kiln.cast %x : (tensor<8xbf16>) -> tensor<8xf32>
  %1 = kiln.cast %0 : (tensor<8xf32>) -> tensor<8xbf16>
  return %1 : tensor<8xbf16>
}

// An embedding gathers bf16 rows as they are (no f32 copy of the table).
// CHECK-LABEL: func.func @gather
// CHECK-NEXT: %[[E:.*]] = kiln.embedding %{{.*}}, %{{.*}} : (tensor<?xi64>, tensor<50x8xbf16>) -> tensor<?x8xbf16>
// CHECK-NEXT: return %[[E]]
func.func @gather(%ids: tensor<?xi64>, %table: tensor<50x8xbf16>) -> tensor<?x8xbf16> {
  %0 = kiln.embedding %ids, %table : (tensor<?xi64>, tensor<50x8xbf16>) -> tensor<?x8xbf16>
  return %0 : tensor<?x8xbf16>
}

// With rounding-products (the bf16 precision's products round their
// operands themselves), a product's operand that is an f32 value rounded
// to bf16 is read as the f32 value: the input and weight here, not the
// bias (added in f32 after the product: its rounding stays), and not a
// bf16 argument (no f32 source).
// CHECK-LABEL: func.func @rounded_operands
// CHECK: kiln.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// ROUND-LABEL: func.func @rounded_operands
// ROUND-SAME: (%[[X:[^:]*]]: tensor<?x8xf32>, %[[W:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<4xf32>, %[[H:[^:]*]]: tensor<?x8xbf16>)
// ROUND: %[[BB:.*]] = kiln.cast %[[B]] : (tensor<4xf32>) -> tensor<4xbf16>
// ROUND: %[[BW:.*]] = kiln.cast %[[BB]] : (tensor<4xbf16>) -> tensor<4xf32>
// ROUND: kiln.linear %[[X]], %[[W]], %[[BW]] : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// ROUND: %[[HW:.*]] = kiln.cast %[[H]] : (tensor<?x8xbf16>) -> tensor<?x8xf32>
// ROUND: kiln.linear %[[HW]], %[[W]] : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
func.func @rounded_operands(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>, %h: tensor<?x8xbf16>)
    -> (tensor<?x4xbf16>, tensor<?x4xbf16>) {
  %xb = kiln.cast %x : (tensor<?x8xf32>) -> tensor<?x8xbf16>
  %wb = kiln.cast %w : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %bb = kiln.cast %b : (tensor<4xf32>) -> tensor<4xbf16>
  %0 = kiln.linear %xb, %wb, %bb : (tensor<?x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> tensor<?x4xbf16>
  %1 = kiln.linear %h, %wb : (tensor<?x8xbf16>, tensor<4x8xbf16>) -> tensor<?x4xbf16>
  return %0, %1 : tensor<?x4xbf16>, tensor<?x4xbf16>
}
