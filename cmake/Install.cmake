# `cmake --install` installs (relative to the prefix, GNU layout):
#   include/npucache/                      the public headers
#   lib/libnpucache.so, libnpucache_models.so
#   lib/cmake/npucache/                    find_package(npucache): npucache::npucache, npucache::models
#   lib/pkgconfig/npucache.pc, npucache-models.pc
#   ${NPUCACHE_INSTALL_PLUGINDIR}          libh5zzstd.so, the HDF5 zstd filter plugin
#                                          (lib/npucache/hdf5-plugins; `npucache --plugin-path`)
#   bin/npucache, npucache-warmup, npucache-infer
#                                          (npucache links the library statically:
#                                          npucache_internal, src/CMakeLists.txt)
#   share/npucache/configs/                the shipped model configs (models/hf_config.h)
#   share/npucache/launch/common.sh        the launchers' shared part
#   share/doc/npucache/                    README.md and GUIDE.md as installed copies
#                                          (cmake/InstalledDocs.cmake: they name
#                                          installed places only), LICENSE
#   share/doc/npucache/examples/           the examples, a CMake project of its own
#   share/man/man1/npucache.1
# so that consumers write
#   find_package(npucache) + target_link_libraries(app npucache::npucache)
# or `pkg-config --cflags --libs npucache`.
include(CMakePackageConfigHelpers)
install(TARGETS npucache npucache_models npucache_cli
  EXPORT npucacheTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS h5zzstd LIBRARY DESTINATION ${NPUCACHE_INSTALL_PLUGINDIR})
install(DIRECTORY include/npucache DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${NPUCACHE_GENERATED_INCLUDE_DIR}/npucache/version_config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/npucache)
# The shipped model configs, found by name at run time (models/hf_config.h).
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/npucache/configs FILES_MATCHING PATTERN "*.json")
install(EXPORT npucacheTargets NAMESPACE npucache::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/npucache)
configure_package_config_file(cmake/npucacheConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/npucacheConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/npucache
  PATH_VARS NPUCACHE_INSTALL_PLUGINDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/npucacheConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/npucacheConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/npucacheConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/npucache)

# An install folder as pkg-config sees it: ${prefix}/<dir>, or <dir> when
# it is absolute.
function(npucache_pc_dir out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
set(_pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${_pcdir}")
  set(NPUCACHE_PC_PREFIX_FROM_PCDIR "")
  set(NPUCACHE_PC_PREFIX_FROM_PCDIR_ABS "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH NPUCACHE_PC_PREFIX_FROM_PCDIR /prefix/${_pcdir} /prefix)
endif()
npucache_pc_dir(NPUCACHE_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
npucache_pc_dir(NPUCACHE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
npucache_pc_dir(NPUCACHE_PC_PLUGINDIR "${NPUCACHE_INSTALL_PLUGINDIR}")
foreach(pc npucache npucache-models)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  if(NPUCACHE_PC_PREFIX_FROM_PCDIR_ABS)  # an absolute libdir: the pc file is not relocatable
    file(READ ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${pc}.pc _pc)
    string(REPLACE "prefix=\${pcfiledir}/" "prefix=${NPUCACHE_PC_PREFIX_FROM_PCDIR_ABS}" _pc "${_pc}")
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${pc}.pc "${_pc}")
  endif()
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${pc}.pc DESTINATION ${_pcdir})
endforeach()

# The launchers as commands: bin/npucache-warmup and bin/npucache-infer are
# launch/warmup.sh and launch/infer.sh finding their common.sh in
# ${CMAKE_INSTALL_DATADIR}/npucache/launch (the source tree's find it next
# to them) and naming themselves in their usage text; installed next to
# bin/npucache, they run it (launch/common.sh).
set(_launch_share ${CMAKE_INSTALL_DATADIR}/npucache/launch)
if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_DATADIR}")
  set(_launch_from_bin "${CMAKE_INSTALL_FULL_DATADIR}/npucache/launch")
  set(_launch_dir_expr "${_launch_from_bin}")
else()
  file(RELATIVE_PATH _launch_from_bin /prefix/${CMAKE_INSTALL_BINDIR} /prefix/${_launch_share})
  set(_launch_dir_expr "$(dirname \"$(readlink -f \"$0\")\")/${_launch_from_bin}")
endif()
foreach(job warmup infer)
  set(_src ${PROJECT_SOURCE_DIR}/launch/${job}.sh)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_src})
  file(READ ${_src} _script)
  set(_line "launch_dir=\"$(dirname \"$(readlink -f \"$0\")\")\"")
  string(FIND "${_script}" "${_line}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "launch/${job}.sh no longer has the line ${_line} that the installed copy replaces")
  endif()
  string(REPLACE "${_line}" "launch_dir=\"${_launch_dir_expr}\"" _script "${_script}")
  string(REPLACE "launch/${job}.sh" "npucache-${job}" _script "${_script}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/launch/npucache-${job} "${_script}")
  install(PROGRAMS ${CMAKE_CURRENT_BINARY_DIR}/launch/npucache-${job} DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
install(FILES launch/common.sh DESTINATION ${_launch_share})

# Documentation and the man page (docs/npucache.1). README.md and
# docs/GUIDE.md are installed as copies naming the installed places (made
# at install time, when the prefix is known); ARCHITECTURE.md, FORMAT.md and
# SCALING.md describe the source tree and stay with it.
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
foreach(_doc README.md docs/GUIDE.md)
  get_filename_component(_name ${_doc} NAME)
  install(CODE "execute_process(COMMAND \"${CMAKE_COMMAND}\" -DIN=${PROJECT_SOURCE_DIR}/${_doc}
      \"-DOUT=\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}/${_name}\"
      \"-DPREFIX=\${CMAKE_INSTALL_PREFIX}\" -DBINDIR=${CMAKE_INSTALL_BINDIR} -DDATADIR=${CMAKE_INSTALL_DATADIR}
      -DDOCDIR=${CMAKE_INSTALL_DOCDIR} -DINCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR}
      -P ${PROJECT_SOURCE_DIR}/cmake/InstalledDocs.cmake RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR \"making the installed ${_name} failed\")
    endif()
    message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}/${_name}\")
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}/${_name}\")")
endforeach()
# The examples (every examples/*.cpp: the docs run them), with their
# CMakeLists.txt, which builds them against the installed package when it
# is the top-level project.
file(GLOB _examples CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.cpp)
install(FILES examples/CMakeLists.txt ${_examples} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
# The man page is written by hand (docs/npucache.1; tests/tools/man_page.sh
# checks it names every command and variable); the build fills in the
# version and the plugin folder.
if(IS_ABSOLUTE "${NPUCACHE_INSTALL_PLUGINDIR}")
  set(NPUCACHE_MAN_PLUGINDIR "${NPUCACHE_INSTALL_PLUGINDIR}")
else()
  set(NPUCACHE_MAN_PLUGINDIR "<prefix>/${NPUCACHE_INSTALL_PLUGINDIR}")
endif()
string(REPLACE "-" "\\-" NPUCACHE_MAN_PLUGINDIR "${NPUCACHE_MAN_PLUGINDIR}")
set(NPUCACHE_MAN_PAGE ${CMAKE_CURRENT_BINARY_DIR}/man/npucache.1)
configure_file(docs/npucache.1 ${NPUCACHE_MAN_PAGE} @ONLY)
install(FILES ${NPUCACHE_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
