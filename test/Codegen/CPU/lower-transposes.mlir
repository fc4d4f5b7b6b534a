// kiln-lower-transposes: on AVX-512 (x86-64-v4) a 16x16 f32 transpose
// becomes four stages of 16 two-input shuffles (unpack lo/hi within
// 128-bit lanes; shufps 0x44/0xEE; shuff32x4 0x88/0xDD twice), an empty
// inline asm after each of the first three; rows read one by one take
// the last shuffles directly, and only a 2-D use gets them inserted (in
// order); on AVX2 (x86-64-v3) an 8x8 f32 transpose becomes x86vector's
// 8x8 sequence (blends as inline asm); other shapes and element types are
// left alone; without a target it fails.
// RUN: not kiln-opt %s -kiln-lower-transposes 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v4 -kiln-lower-transposes | FileCheck %s --check-prefix=V4
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v3 -kiln-lower-transposes | FileCheck %s --check-prefix=V3
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v4 -kiln-lower-transposes | FileCheck %s --check-prefix=COUNT
// RUN: kiln-opt %s -kiln-set-target=cpu=x86-64-v4 -kiln-lower-transposes -canonicalize | FileCheck %s --check-prefix=FOLDED

// NONE: error: kiln-lower-transposes needs the target CPU: the module's 'kiln.target' attribute, set by kiln-set-target{cpu=...}

// V4-LABEL: func.func @transpose16
// V4-NOT: vector.transpose
// V4: %[[R0:.*]] = vector.extract %{{.*}}[0] : vector<16xf32> from vector<16x16xf32>
// V4: %[[R1:.*]] = vector.extract %{{.*}}[1] : vector<16xf32> from vector<16x16xf32>
// V4: %[[LO:.*]] = vector.shuffle %[[R0]], %[[R1]] [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29]
// V4: %[[HI:.*]] = vector.shuffle %[[R0]], %[[R1]] [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31]
// V4: %[[T0:.*]] = llvm.inline_asm "", "=v,0" %[[LO]] : (vector<16xf32>) -> vector<16xf32>
// V4: %[[T1:.*]] = llvm.inline_asm "", "=v,0" %[[HI]]
// V4: %[[T2:.*]] = llvm.inline_asm "", "=v,0"
// V4: vector.shuffle %[[T0]], %[[T2]] [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29]
// V4: vector.shuffle %[[T0]], %[[T2]] [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31]
// V4: vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
// V4: vector.shuffle {{.*}} [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31]
// V4: vector.insert {{.*}} [0] : vector<16xf32> into vector<16x16xf32>
// V4-NEXT: vector.insert {{.*}} [1] : vector<16xf32> into vector<16x16xf32>
// V4-LABEL: func.func @rows
// V4-NOT: vector.insert
// V4: return
// V4-LABEL: func.func @others
// V4: vector.transpose %{{.*}}, [1, 0] : vector<8x8xf32> to vector<8x8xf32>
// V4: vector.transpose %{{.*}}, [1, 0] : vector<16x16xi32> to vector<16x16xi32>
// V4: vector.transpose %{{.*}}, [1, 0] : vector<16x8xf32> to vector<8x16xf32>

// V3-LABEL: func.func @transpose16
// V3: vector.transpose %{{.*}}, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
// V3-NOT: llvm.inline_asm
// V3-LABEL: func.func @others
// V3-NOT: vector<8x8xf32> to vector<8x8xf32>
// V3: vector.shuffle %{{.*}}, %{{.*}} [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xf32>, vector<8xf32>
// V3: llvm.inline_asm asm_dialect = intel "vblendps $0, $1, $2, 0xcc"
// V3: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
// V3: vector.insert %{{.*}}, %{{.*}} [7] : vector<8xf32> into vector<8x8xf32>
// V3: vector.transpose %{{.*}}, [1, 0] : vector<16x16xi32> to vector<16x16xi32>
// V3: vector.transpose %{{.*}}, [1, 0] : vector<16x8xf32> to vector<8x16xf32>

// COUNT-LABEL: func.func @transpose16
// COUNT-COUNT-64: vector.shuffle
// COUNT-NOT: vector.shuffle
// COUNT-LABEL: func.func @rows

// The asm keeps the folds from merging the stages into per-element
// inserts (what the canonicalizer made of the transpose itself).
// FOLDED-LABEL: func.func @rows
// FOLDED-NOT: vector.to_elements
// FOLDED-NOT: vector.insert
// FOLDED-COUNT-20: llvm.inline_asm
// FOLDED-NOT: llvm.inline_asm
// FOLDED: %[[R0:.*]] = vector.shuffle {{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
// FOLDED-NEXT: %[[R13:.*]] = vector.shuffle {{.*}} [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31]
// FOLDED-NEXT: return %[[R0]], %[[R13]] : vector<16xf32>, vector<16xf32>
func.func @transpose16(%v: vector<16x16xf32>) -> vector<16x16xf32> {
  %t = vector.transpose %v, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
  return %t : vector<16x16xf32>
}

// Rows 0 and 13 of a transpose, as a transfer_write unrolled by
// convert-vector-to-scf reads them.
func.func @rows(%v: vector<16x16xf32>) -> (vector<16xf32>, vector<16xf32>) {
  %t = vector.transpose %v, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
  %r0 = vector.extract %t[0] : vector<16xf32> from vector<16x16xf32>
  %r13 = vector.extract %t[13] : vector<16xf32> from vector<16x16xf32>
  return %r0, %r13 : vector<16xf32>, vector<16xf32>
}

func.func @others(%a: vector<8x8xf32>, %b: vector<16x16xi32>,
                  %c: vector<16x8xf32>)
    -> (vector<8x8xf32>, vector<16x16xi32>, vector<8x16xf32>) {
  %ta = vector.transpose %a, [1, 0] : vector<8x8xf32> to vector<8x8xf32>
  %tb = vector.transpose %b, [1, 0] : vector<16x16xi32> to vector<16x16xi32>
  %tc = vector.transpose %c, [1, 0] : vector<16x8xf32> to vector<8x16xf32>
  return %ta, %tb, %tc : vector<8x8xf32>, vector<16x16xi32>, vector<8x16xf32>
}
