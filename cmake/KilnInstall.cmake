#===- KilnInstall.cmake - cmake --install and find_package(Kiln) ----------===#
#
# Installs the tools (kiln-compile, kiln-opt), Kiln::Kiln (libkiln.so: the
# DSL, the JIT, training and the generator of ahead-of-time models),
# Kiln::Runtime (a static library with no LLVM or MLIR dependency),
# Kiln::MPI where built, the public headers under <prefix>/include/kiln, and
# a package configuration, so that a user's project can do:
#
#   find_package(Kiln REQUIRED)
#   add_executable(app app.cpp)                     # #include <kiln/kiln.h>
#   target_link_libraries(app PRIVATE Kiln::Kiln)   # write, JIT-run, train
#
#   kiln_add_model(my-model GENERATOR model.cpp)    # ahead of time
#   target_link_libraries(my-app PRIVATE my-model)  # #include <kiln/runtime.h>
#
#===------------------------------------------------------------------------===#

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The tools and libkiln.so find libMLIR/libLLVM where Debian puts them.
set_target_properties(kiln-compile kiln-opt PROPERTIES
  INSTALL_RPATH "${LLVM_LIBRARY_DIR}")
set_target_properties(KilnRuntime PROPERTIES EXPORT_NAME Runtime)
set(KILN_INSTALLED_TARGETS KilnRuntime Kiln kiln-compile kiln-opt)
# Kiln::MPI (data-parallel training), where it was built.
set(KILN_WITH_MPI OFF)
if(TARGET KilnMPI)
  set_target_properties(KilnMPI PROPERTIES EXPORT_NAME MPI)
  list(APPEND KILN_INSTALLED_TARGETS KilnMPI)
  set(KILN_WITH_MPI ON)
endif()
install(TARGETS ${KILN_INSTALLED_TARGETS}
  EXPORT KilnTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT KilnTargets NAMESPACE Kiln::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)

# The public headers, rooted as in the repository ("runtime/Tensor.h"), and
# one include per audience: <kiln/kiln.h> (Kiln::Kiln), <kiln/runtime.h>
# (Kiln::Runtime). Internal headers (memref copies, the CUDA and OpenMP
# shims, the spec text) are not installed.
install(FILES
  runtime/Allocator.h runtime/Aot.h runtime/AotAbi.h runtime/Checkpoint.h
  runtime/Communicator.h runtime/Data.h runtime/Error.h runtime/Files.h
  runtime/Function.h
  runtime/Generate.h runtime/Init.h runtime/ParameterStore.h
  runtime/PreparedWeights.h
  runtime/Safetensors.h runtime/Sampling.h runtime/Schedule.h
  runtime/StateDict.h runtime/Tensor.h runtime/Trainer.h
  runtime/TrainingLoop.h
  DESTINATION include/kiln/runtime)
if(TARGET KilnMPI)
  install(FILES runtime/MPI/MpiCommunicator.h
    DESTINATION include/kiln/runtime/MPI)
endif()
install(FILES
  compiler/DSL/DSL.h compiler/DSL/Graph.h compiler/DSL/Models.h
  compiler/DSL/NN.h compiler/DSL/Ops.h
  DESTINATION include/kiln/compiler/DSL)
install(FILES compiler/Target/AOT/Generator.h
  DESTINATION include/kiln/compiler/Target/AOT)
install(FILES compiler/Target/Common/TrainingStep.h
  DESTINATION include/kiln/compiler/Target/Common)
install(FILES compiler/Target/JIT/CompiledModel.h compiler/Target/JIT/Jit.h
  compiler/Target/JIT/Training.h
  DESTINATION include/kiln/compiler/Target/JIT)
install(FILES compiler/include/kiln/kiln.h runtime/include/kiln/runtime.h
  DESTINATION include/kiln)

configure_package_config_file(cmake/KilnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/KilnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/KilnConfigVersion.cmake
  VERSION 0.5.0 COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/KilnConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/KilnConfigVersion.cmake
  cmake/KilnAddModel.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
