# `cmake --install` installs the public headers, the shared library, the
# `npucache` command, the shipped model configs and a package config so
# that consumers write
#   find_package(npucache) + target_link_libraries(app npucache::npucache)
include(CMakePackageConfigHelpers)
install(TARGETS npucache npucache_models npucache_cli
  EXPORT npucacheTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/npucache DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The shipped model configs, found by name at run time (models/hf_config.h).
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/npucache/configs FILES_MATCHING PATTERN "*.json")
install(EXPORT npucacheTargets NAMESPACE npucache::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/npucache)
configure_package_config_file(cmake/npucacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/npucacheConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/npucache)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/npucacheConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/npucacheConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/npucacheConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/npucache)
