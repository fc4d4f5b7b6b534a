#===- KilnInstall.cmake - cmake --install and find_package(Kiln) ----------===#
#
# Installs the tools (kiln-compile, kiln-opt), the runtime (a static library
# with no LLVM or MLIR dependency), the generator library and the public
# headers under <prefix>/include/kiln, and a package configuration so that a
# user's project can do:
#
#   find_package(Kiln REQUIRED)
#   kiln_add_model(my-model GENERATOR model.cpp)
#   target_link_libraries(my-app PRIVATE my-model)
#
#===------------------------------------------------------------------------===#

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The tools and the generator library find libMLIR/libLLVM where Debian puts
# them.
set_target_properties(kiln-compile kiln-opt PROPERTIES
  INSTALL_RPATH "${LLVM_LIBRARY_DIR}")
set_target_properties(KilnRuntime PROPERTIES EXPORT_NAME Runtime)
set_target_properties(KilnGenerator PROPERTIES EXPORT_NAME Generator)
set(KILN_INSTALLED_TARGETS KilnRuntime KilnGenerator kiln-compile kiln-opt)
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

# The public headers, rooted as in the repository ("runtime/Tensor.h").
install(DIRECTORY runtime/ DESTINATION include/kiln/runtime
  FILES_MATCHING PATTERN "*.h")
install(FILES
  compiler/DSL/DSL.h compiler/DSL/Graph.h compiler/DSL/Models.h
  compiler/DSL/NN.h compiler/DSL/Ops.h
  DESTINATION include/kiln/compiler/DSL)
install(FILES compiler/Target/AOT/Generator.h
  DESTINATION include/kiln/compiler/Target/AOT)
install(FILES compiler/Target/JIT/Jit.h compiler/Target/JIT/Trainer.h
  DESTINATION include/kiln/compiler/Target/JIT)

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
