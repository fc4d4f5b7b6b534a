// RUN: kiln-opt %s -split-input-file -kiln-approximate-math | FileCheck %s

// exp and tanh on f32 vectors become polynomials of arithmetic (which
// vectorize) instead of libm calls, one element at a time.
// CHECK-LABEL: func.func @f32_vector
// CHECK-NOT:     math.exp
// CHECK-NOT:     math.tanh
// CHECK:         arith.mulf {{.*}} : vector<8xf32>
// CHECK:         return
func.func @f32_vector(%x: vector<8xf32>) -> (vector<8xf32>, vector<8xf32>) {
  %e = math.exp %x : vector<8xf32>
  %t = math.tanh %x : vector<8xf32>
  return %e, %t : vector<8xf32>, vector<8xf32>
}

// -----

// f64 has no approximation: the op stays for libm.
// CHECK-LABEL: func.func @f64_stays
// CHECK:         math.exp %{{.+}} : f64
func.func @f64_stays(%x: f64) -> f64 {
  %e = math.exp %x : f64
  return %e : f64
}
