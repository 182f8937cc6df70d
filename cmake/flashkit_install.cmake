# `cmake --install` yields headers, the shared library and a CMake package, so a C++
# user writes find_package(flashkit) and links flashkit::flashkit.
include(CMakePackageConfigHelpers)

install(TARGETS flashkit EXPORT flashkitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/../include/flashkit
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT flashkitTargets NAMESPACE flashkit::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flashkit)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/flashkitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/flashkitConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flashkit)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/flashkitConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flashkitConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/flashkitConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flashkit)
