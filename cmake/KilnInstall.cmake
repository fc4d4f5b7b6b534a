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

# The public headers, rooted as in the repository ("runtime/Tensor.h" in
# include/kiln/runtime/), each library's listed with it (its
# KILN_PUBLIC_HEADERS property), and one include per audience:
# <kiln/kiln.h> (Kiln::Kiln), <kiln/runtime.h> (Kiln::Runtime).
set(installed_headers)
foreach(library KilnRuntime KilnMPI KilnDSL KilnJIT KilnTargetCommon Kiln)
  if(TARGET ${library})
    get_target_property(headers ${library} KILN_PUBLIC_HEADERS)
    list(APPEND installed_headers ${headers})
  endif()
endforeach()
foreach(header ${installed_headers})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${header} DESTINATION include/kiln/${dir})
endforeach()
install(FILES compiler/include/kiln/kiln.h runtime/include/kiln/runtime.h
  DESTINATION include/kiln)
# What an installed header includes is installed too (the runtime's headers
# include base/DType.h): checked when configuring, not by a user's build.
foreach(header ${installed_headers} compiler/include/kiln/kiln.h
    runtime/include/kiln/runtime.h)
  file(STRINGS ${PROJECT_SOURCE_DIR}/${header} lines REGEX "^#include \"")
  foreach(line ${lines})
    string(REGEX REPLACE "^#include \"([^\"]*)\".*" "\\1" included "${line}")
    if(NOT included IN_LIST installed_headers AND
       NOT included STREQUAL "kiln/runtime.h")
      message(FATAL_ERROR "kiln: the installed ${header} includes "
        "${included}, which is not installed (KILN_PUBLIC_HEADERS)")
    endif()
  endforeach()
endforeach()

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
