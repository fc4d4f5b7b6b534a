#===- KilnDocs.cmake - Op and pass reference generated from ODS -----------===#
#
# `cmake --build build --target kiln-doc` writes one Markdown page per
# dialect and per Passes.td into build/docs/ (generated, never checked in):
#
#   KilnDialect.md           the kiln dialect's ops, attributes and types
#   KilnPasses.md            dialects/Kiln/Transforms (shape inference,
#                            autodiff, training step, ...)
#   KilnToLinalgPasses.md    compiler/Conversion/KilnToLinalg
#   CodegenCommonPasses.md   compiler/Codegen/Common
#   CodegenCPUPasses.md      compiler/Codegen/CPU
#   CodegenGPUPasses.md      compiler/Codegen/GPU
#
#===------------------------------------------------------------------------===#

add_custom_target(kiln-doc)
# add_mlir_doc adds each page to mlir-doc, which only an LLVM build defines.
if(NOT TARGET mlir-doc)
  add_custom_target(mlir-doc)
endif()

# kiln_add_doc(<td file, repo-relative, without .td> <page> <tblgen flags>...)
function(kiln_add_doc td page)
  add_mlir_doc(${PROJECT_SOURCE_DIR}/${td} ${page} "" ${ARGN})
  add_dependencies(kiln-doc ${page}DocGen)
endfunction()

kiln_add_doc(dialects/Kiln/IR/KilnOps KilnDialect -gen-dialect-doc
  -dialect=kiln)
kiln_add_doc(dialects/Kiln/Transforms/Passes KilnPasses -gen-pass-doc)
kiln_add_doc(compiler/Conversion/KilnToLinalg/Passes KilnToLinalgPasses
  -gen-pass-doc)
kiln_add_doc(compiler/Codegen/Common/Passes CodegenCommonPasses -gen-pass-doc)
kiln_add_doc(compiler/Codegen/CPU/Passes CodegenCPUPasses -gen-pass-doc)
kiln_add_doc(compiler/Codegen/GPU/Passes CodegenGPUPasses -gen-pass-doc)
