#===- KilnPrecompiledHeaders.cmake - MLIR's headers parsed once per group -===#
#
# Nearly every compiler source includes a large part of MLIR's headers, and
# parsing them is most of its compile: FuseElementwise.cpp compiles in 15.5 s
# from the headers and in 3.1 s with them precompiled (AMD EPYC Zen 3,
# 2026-11-27); the precompiled header itself takes ~25 s. So the targets
# compiled with the same flags share one precompiled header of the MLIR
# headers below (MLIR's own, never Kiln's: a layer's include rule still
# holds, and editing a Kiln header rebuilds nothing extra):
#
#   kiln_precompile_mlir_headers(<target> [REUSE_FROM <first target>])
#
# The first target of a group builds the header; the others name it in
# REUSE_FROM and must use the same compile options and definitions (the
# include directories may differ: the header holds MLIR's only). Targets with
# different options (exceptions, sanitizers) build one of their own.
# -DKILN_PCH=OFF compiles every source from its own includes (to check that
# each source includes what it uses).
#
#===------------------------------------------------------------------------===#

option(KILN_PCH "Precompile the MLIR headers of the compiler's sources" ON)

set(KILN_PCH_HEADERS
  <mlir/Dialect/Arith/IR/Arith.h>
  <mlir/Dialect/Bufferization/IR/Bufferization.h>
  <mlir/Dialect/Func/IR/FuncOps.h>
  <mlir/Dialect/GPU/IR/GPUDialect.h>
  <mlir/Dialect/LLVMIR/LLVMDialect.h>
  <mlir/Dialect/Linalg/IR/Linalg.h>
  <mlir/Dialect/Math/IR/Math.h>
  <mlir/Dialect/MemRef/IR/MemRef.h>
  <mlir/Dialect/SCF/IR/SCF.h>
  <mlir/Dialect/Tensor/IR/Tensor.h>
  <mlir/Dialect/Vector/IR/VectorOps.h>
  <mlir/IR/Builders.h>
  <mlir/IR/BuiltinOps.h>
  <mlir/IR/IRMapping.h>
  <mlir/IR/PatternMatch.h>
  <mlir/Pass/Pass.h>
  <mlir/Pass/PassManager.h>
  <mlir/Transforms/DialectConversion.h>
  <mlir/Transforms/GreedyPatternRewriteDriver.h>
  <llvm/Support/Debug.h>
  <llvm/Support/raw_ostream.h>
)

function(kiln_precompile_mlir_headers target)
  if(NOT KILN_PCH)
    return()
  endif()
  cmake_parse_arguments(ARG "" "REUSE_FROM" "" ${ARGN})
  if(ARG_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${ARG_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE ${KILN_PCH_HEADERS})
  endif()
endfunction()

# ccache caches compiles that read a precompiled header only when told that
# its time stamps and macros may be trusted (and clang leaves the time stamp
# out of the header).
if(KILN_PCH AND KILN_CCACHE)
  set(launcher ${CMAKE_COMMAND} -E env
    CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
    ${KILN_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${launcher})
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:SHELL:-Xclang -fno-pch-timestamp>")
endif()
