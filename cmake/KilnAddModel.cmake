#===- KilnAddModel.cmake - Compile DSL models ahead of time ---------------===#
#
# kiln_add_model(<target> GENERATOR <source>... [NAME <identifier>]
#                [CPU <cpu>] [PRECISION fp32|bf16] [FUNCTIONS <graph>...]
#                [DEPENDS <file>...])
#
# Builds the generator program from <source>... (a main() that builds a DSL
# model and calls kiln::generatorMain), runs it to get the model's kiln IR,
# compiles that with kiln-compile, and makes <target>: a static library with
# the compiled model and, on its include path, the header <NAME>.h. Link
# <target> into any program; it brings Kiln's runtime, never LLVM or MLIR.
# NAME (default: <target> with '-' as '_') prefixes every symbol; CPU
# (default: host) is the code's target, e.g. x86-64-v3 for portable code;
# PRECISION (default: fp32) bf16 multiplies in bf16 with fp32 sums (a CPU
# with AVX512-BF16 only: docs/precision.md).
# FUNCTIONS picks the graphs to compile (default: all of the module's, and
# "train_step" when the generator adds one). DEPENDS lists files the
# generator reads (a vocabulary, a config), so that
# the model is regenerated when they change.
#
#===------------------------------------------------------------------------===#

function(kiln_add_model target)
  cmake_parse_arguments(ARG "" "NAME;CPU;PRECISION"
                        "GENERATOR;FUNCTIONS;DEPENDS" ${ARGN})
  if(NOT ARG_GENERATOR)
    message(FATAL_ERROR "kiln_add_model(${target}): GENERATOR is required")
  endif()
  if(NOT ARG_NAME)
    string(REPLACE "-" "_" ARG_NAME "${target}")
  endif()
  if(NOT ARG_CPU)
    set(ARG_CPU host)
  endif()
  if(NOT ARG_PRECISION)
    set(ARG_PRECISION fp32)
  endif()
  set(select)
  if(ARG_FUNCTIONS)
    string(REPLACE ";" "," list "${ARG_FUNCTIONS}")
    set(select --functions ${list})
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${target}.kiln)
  file(MAKE_DIRECTORY ${dir})

  add_executable(${target}-generator ${ARG_GENERATOR})
  target_compile_options(${target}-generator PRIVATE -fexceptions)
  target_link_libraries(${target}-generator PRIVATE Kiln::Kiln)

  add_custom_command(
    OUTPUT ${dir}/${ARG_NAME}.mlir
    COMMAND $<TARGET_FILE:${target}-generator> -o ${dir}/${ARG_NAME}.mlir
    DEPENDS ${target}-generator ${ARG_DEPENDS}
    COMMENT "Generating the kiln IR of ${target}")
  add_custom_command(
    OUTPUT ${dir}/${ARG_NAME}.o ${dir}/${ARG_NAME}.h
    COMMAND $<TARGET_FILE:Kiln::kiln-compile> ${dir}/${ARG_NAME}.mlir
            -o ${dir}/${ARG_NAME}.o --header ${dir}/${ARG_NAME}.h
            --name ${ARG_NAME} --cpu ${ARG_CPU} --precision ${ARG_PRECISION}
            ${select}
    DEPENDS ${dir}/${ARG_NAME}.mlir Kiln::kiln-compile
    COMMENT "Compiling ${target} ahead of time (kiln-compile)")
  set_source_files_properties(${dir}/${ARG_NAME}.o PROPERTIES
    EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(${target} STATIC ${dir}/${ARG_NAME}.o ${dir}/${ARG_NAME}.h)
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${dir}>)
  target_link_libraries(${target} PUBLIC Kiln::Runtime)
endfunction()
