// Every pipeline ends with kiln-check-lowered: ops that no pass lowers (here
// the shape dialect's, which Kiln never produces) are errors naming them,
// not a module that fails later, in translation to LLVM IR or in the JIT.
// RUN: kiln-opt %s -verify-diagnostics --kiln-to-llvm
// RUN: kiln-opt %s -verify-diagnostics --kiln-to-gpu

// The casts between the LLVM values and the shape ops' index: two for the
// arguments, one for the result.
// expected-error @+1 {{'builtin.unrealized_conversion_cast' op was not lowered to llvm}}
func.func @f(%a: index, %b: index) -> index {
  // expected-error @+1 {{'shape.index_to_size' op was not lowered to llvm}}
  %x = shape.index_to_size %a
  // expected-error @+1 {{'shape.index_to_size' op was not lowered to llvm}}
  %y = shape.index_to_size %b
  // expected-error @+1 {{'shape.add' op was not lowered to llvm}}
  %s = shape.add %x, %y : !shape.size, !shape.size -> !shape.size
  // expected-error @+1 {{'shape.size_to_index' op was not lowered to llvm}}
  %r = shape.size_to_index %s : !shape.size
  // expected-error @+1 {{'builtin.unrealized_conversion_cast' op was not lowered to llvm}}
  return %r : index
}
