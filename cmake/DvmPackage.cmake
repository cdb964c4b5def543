# Packaging: dvm/version.h, the dvm::dvm alias, and (DVM_INSTALL) the install
# rules: headers, libdvm.a, the exported CMake package (dvmConfig.cmake,
# dvmConfigVersion.cmake, dvmTargets.cmake) and dvm.pc for pkg-config.
# Included from the top-level CMakeLists.txt once the dvm target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

option(DVM_INSTALL "Generate the install rules (headers, libdvm.a, CMake package, dvm.pc)"
       ${PROJECT_IS_TOP_LEVEL})

# dvm/version.h comes from project(VERSION), so the version is written once.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${PROJECT_BINARY_DIR}/include/dvm/version.h @ONLY)
target_include_directories(dvm PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
# The public headers need C++17; the library itself is built as C++20.
target_compile_features(dvm PUBLIC cxx_std_17)

# The installed target's name, for a parent that uses add_subdirectory().
add_library(dvm::dvm ALIAS dvm)

if(NOT DVM_INSTALL)
  return()
endif()

set(DVM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dvm)
install(TARGETS dvm EXPORT dvmTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dvm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/dvm/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dvm)
install(EXPORT dvmTargets NAMESPACE dvm:: FILE dvmTargets.cmake DESTINATION ${DVM_INSTALL_CMAKEDIR})

# libdvm.a is static: its private link dependencies (TBB, asmjit with the
# JIT) are on every user's link line, so the package config finds them.
set(DVM_CONFIG_DEPENDENCIES "find_dependency(Threads)\nfind_dependency(TBB CONFIG)\n")
if(DVM_JIT)
  string(APPEND DVM_CONFIG_DEPENDENCIES "find_dependency(asmjit CONFIG)\n")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dvmConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dvmConfig.cmake
                              INSTALL_DESTINATION ${DVM_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dvmConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dvmConfig.cmake ${PROJECT_BINARY_DIR}/dvmConfigVersion.cmake
        DESTINATION ${DVM_INSTALL_CMAKEDIR})

# dvm.pc. The prefix is found from the .pc file's own place, so the tree can
# be installed with `cmake --install --prefix` anywhere or moved.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(DVM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(DVM_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(DVM_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  set(DVM_PC_PREFIX "\${pcfiledir}")
  string(REPLACE "/" ";" _dvm_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  foreach(_dvm_part IN LISTS _dvm_parts)
    string(APPEND DVM_PC_PREFIX "/..")
  endforeach()
  set(DVM_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(DVM_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# Debian ships tbb.pc (it is Required) but no asmjit.pc: asmjit goes on Libs
# by name, with its directory when the linker would not search it anyway.
set(DVM_PC_LIBS "")
if(DVM_JIT)
  get_target_property(_dvm_asmjit asmjit::asmjit LOCATION)
  get_filename_component(_dvm_asmjit_dir "${_dvm_asmjit}" DIRECTORY)
  if(NOT _dvm_asmjit_dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    string(APPEND DVM_PC_LIBS " -L${_dvm_asmjit_dir}")
  endif()
  string(APPEND DVM_PC_LIBS " -lasmjit -lrt")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/dvm.pc.in ${PROJECT_BINARY_DIR}/dvm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dvm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
