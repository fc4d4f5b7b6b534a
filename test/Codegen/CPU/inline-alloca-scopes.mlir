// RUN: kiln-opt %s -split-input-file -kiln-inline-alloca-scopes | FileCheck %s

// A scope that allocates nothing on the stack (as convert-scf-to-openmp
// wraps every parallel loop body) is inlined, its results replaced by the
// values it returned.
// CHECK-LABEL: func.func @no_alloca
// CHECK-NOT:     memref.alloca_scope
// CHECK:         %[[S:.+]] = arith.addf %{{.+}}, %{{.+}} : f32
// CHECK:         return %[[S]]
func.func @no_alloca(%a: f32, %b: f32) -> f32 {
  %r = memref.alloca_scope -> (f32) {
    %s = arith.addf %a, %b : f32
    memref.alloca_scope.return %s : f32
  }
  return %r : f32
}

// -----

// A scope that allocates on the stack stays: inlining it would keep the
// allocation alive past the scope.
// CHECK-LABEL: func.func @alloca
// CHECK:         memref.alloca_scope
// CHECK:           memref.alloca
func.func @alloca(%v: f32) {
  memref.alloca_scope {
    %m = memref.alloca() : memref<4xf32>
    %c0 = arith.constant 0 : index
    memref.store %v, %m[%c0] : memref<4xf32>
  }
  return
}
