#===- KilnLayers.cmake - The include roots of each layer ------------------===#
#
# Includes are written from the repository root ("runtime/Tensor.h",
# "dialects/Kiln/IR/KilnOps.h"), but only the top layers see the whole root.
# A lower layer's include path holds a root of its own under
# ${PROJECT_BINARY_DIR}/layers/, a directory of symbolic links to the folders
# it may include, so that including a higher layer fails to compile:
#
#   base/      header-only vocabulary, nothing but the standard library
#   runtime/   runtime/ and base/; no LLVM    KILN_RUNTIME_INCLUDE_DIRS
#   dialects/  dialects/ and base/, and MLIR  KILN_DIALECTS_INCLUDE_DIRS
#              (its generated .inc files in a root of their own)
#   compiler/, examples/, test/: everything   KILN_ALL_INCLUDE_DIRS
#
# LLVM's and MLIR's headers (KILN_MLIR_INCLUDE_DIRS, system directories) are
# on the path of every layer but the runtime. Each layer's CMakeLists.txt
# puts its roots on the include path of the targets it defines;
# test/Layering checks that a runtime or dialect source cannot reach a
# higher layer's headers, nor a runtime source LLVM's or MLIR's.
#
#===------------------------------------------------------------------------===#

# kiln_layer_root(<root> <from> <folder>...): ${PROJECT_BINARY_DIR}/layers/<root>
# holds a link to <from>/<folder> for each folder, and nothing else.
function(kiln_layer_root root from)
  set(dir ${PROJECT_BINARY_DIR}/layers/${root})
  file(MAKE_DIRECTORY ${dir})
  # Links of folders a layer no longer includes (file(REMOVE) removes a link,
  # never what it points to).
  file(GLOB entries LIST_DIRECTORIES true ${dir}/*)
  foreach(entry ${entries})
    get_filename_component(folder ${entry} NAME)
    if(NOT folder IN_LIST ARGN)
      file(REMOVE ${entry})
    endif()
  endforeach()
  foreach(folder ${ARGN})
    file(CREATE_LINK ${from}/${folder} ${dir}/${folder} SYMBOLIC)
  endforeach()
endfunction()

kiln_layer_root(runtime/src ${PROJECT_SOURCE_DIR} runtime base)
kiln_layer_root(dialects/src ${PROJECT_SOURCE_DIR} dialects base)
# The generated headers: "dialects/Kiln/IR/KilnOps.h.inc".
kiln_layer_root(dialects/gen ${PROJECT_BINARY_DIR} dialects)

set(KILN_RUNTIME_INCLUDE_DIRS ${PROJECT_BINARY_DIR}/layers/runtime/src)
set(KILN_DIALECTS_INCLUDE_DIRS ${PROJECT_BINARY_DIR}/layers/dialects/src
  ${PROJECT_BINARY_DIR}/layers/dialects/gen)
set(KILN_ALL_INCLUDE_DIRS ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
set(KILN_MLIR_INCLUDE_DIRS ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
