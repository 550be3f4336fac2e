# The install test (ctest install_consumer): installs the build tree into a
# scratch prefix and then uses only that prefix, as a user of the package:
#  1. the installed `npucache --plugin-path` names the installed plugin folder;
#  2. a CMake project (find_package(npucache COMPONENTS models), no
#     CMAKE_CXX_STANDARD, so the compiler's default applies) links
#     npucache::npucache and npucache::models, builds, and writes a cache
#     with cache_compile (cold: compiled; warm: hit);
#  3. the same program built through pkg-config (npucache, npucache-models,
#     which set no standard: the build gives -std=c++20, and nothing else:
#     the run path comes from pkg-config's Libs) runs without
#     LD_LIBRARY_PATH and hits that cache; pkg-config's hdf5_plugin_dir is
#     the plugin folder;
#  4. h5dump decodes the entry's compiled_module through the index's external
#     link with HDF5_PLUGIN_PATH at the plugin folder, and cannot without it;
#  5. h5py (Debian's python3-h5py) reads every object through the plugin and
#     checks its xxh3-64 (python3-xxhash) and size against its attributes,
#     and the entry's and h5dump's bytes against the object's;
#  6. the installed launchers run the installed npucache (npucache-warmup
#     --help, then a 2-rank warmup and inference);
#  7. the man page renders without warnings (man -l), the docs are there
#     (README.md, GUIDE.md, LICENSE; the source tree's ARCHITECTURE.md,
#     FORMAT.md and SCALING.md are not installed).
# Variables: BUILD_DIR, SOURCE_DIR (this folder), WORK_DIR, CONSUMER_FLAGS
# (a sanitizer build's flags), CXX, PKG_CONFIG, H5DUMP, PYTHONS (interpreters
# to try for h5py), BINDIR LIBDIR MANDIR DOCDIR (the install folders).
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR CXX PKG_CONFIG H5DUMP PYTHONS BINDIR LIBDIR MANDIR DOCDIR)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake needs -D${v}=...")
  endif()
endforeach()

# run(<what> <out-var> COMMAND ...): runs a command (stdout and stderr
# together), fails the test with its output when it fails.
function(run what out)
  execute_process(${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE text)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${text}")
  endif()
  string(LENGTH "${text}" length)
  if(length GREATER 2000)  # h5dump's listing of the bytes
    string(SUBSTRING "${text}" 0 2000 head)
    message("-- ${what}:\n${head}\n[... ${length} characters]")
  else()
    message("-- ${what}:\n${text}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
function(expect what text regex)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: output does not match '${regex}':\n${text}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(cache ${WORK_DIR}/cache)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/elsewhere ${WORK_DIR}/no-plugins)
run("cmake --install" _ COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# A sanitizer build of the library needs the same runtime in the consumer.
string(REPLACE ";" " " flags "${CONSUMER_FLAGS}")
set(asan_env ASAN_OPTIONS=detect_leaks=0)  # Open MPI's components leak at exit

# 1. The installed plugin folder, as the installed command prints it.
run("npucache --plugin-path" plugin_dir COMMAND ${prefix}/${BINDIR}/npucache --plugin-path)
string(STRIP "${plugin_dir}" plugin_dir)
file(REAL_PATH ${prefix} real_prefix)
if(NOT plugin_dir MATCHES "^${real_prefix}/" OR NOT EXISTS ${plugin_dir}/libh5zzstd.so)
  message(FATAL_ERROR "npucache --plugin-path printed '${plugin_dir}', not a folder of ${real_prefix} holding libh5zzstd.so")
endif()

# 2. The CMake consumer at the compiler's default standard.
run("configuring the consumer" _ COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${flags}"
    "-DCMAKE_EXE_LINKER_FLAGS=${flags}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
file(READ ${WORK_DIR}/build/compile_commands.json commands)
expect("the consumer's compile command (C++20 from the imported targets)" "${commands}" "-std=(c|gnu)\\+\\+20")
run("building the consumer" _ COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("the consumer, cold" out COMMAND ${WORK_DIR}/build/app ${cache} --expect compiled --prefix ${prefix})
expect("the consumer" "${out}" "entry ([^\n]+)")
string(REGEX MATCH "entry ([^\n]+)" _ "${out}")
set(entry_path ${CMAKE_MATCH_1})  # <cache>/<model_info>/<func>
get_filename_component(func ${entry_path} NAME)
get_filename_component(model_dir ${entry_path} DIRECTORY)
get_filename_component(model_info ${model_dir} NAME)
set(index ${cache}/${model_info}.h5)
if(NOT EXISTS ${index})
  message(FATAL_ERROR "no index ${index} for entry ${entry_path}")
endif()
run("the consumer, warm" _ COMMAND ${WORK_DIR}/build/app ${cache} --expect hit)

# 3. The same program through pkg-config.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run("pkg-config" pc COMMAND ${PKG_CONFIG} --cflags --libs npucache npucache-models)
if(pc MATCHES "-std=")
  message(FATAL_ERROR "pkg-config --cflags sets the standard (the consumer chooses it): ${pc}")
endif()
string(STRIP "${pc}" pc)
separate_arguments(pc_args UNIX_COMMAND "${pc}")
separate_arguments(flag_args UNIX_COMMAND "${flags}")
run("pkg-config hdf5_plugin_dir" pc_plugin COMMAND ${PKG_CONFIG} --variable=hdf5_plugin_dir npucache)
string(STRIP "${pc_plugin}" pc_plugin)
file(REAL_PATH ${pc_plugin} pc_plugin)
if(NOT pc_plugin STREQUAL plugin_dir)
  message(FATAL_ERROR "pkg-config's hdf5_plugin_dir is ${pc_plugin}, npucache --plugin-path says ${plugin_dir}")
endif()
expect("pkg-config --libs (the run path of the installed libraries)" "${pc}" "-Wl,-rpath,[^ ]*/${LIBDIR}( |$)")
run("building the consumer with pkg-config" _ COMMAND ${CXX} ${flag_args} -std=c++20 ${SOURCE_DIR}/app.cpp ${pc_args}
    -o ${WORK_DIR}/app-pkgconfig)
run("the pkg-config consumer, warm, without LD_LIBRARY_PATH" _ COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
    ${WORK_DIR}/app-pkgconfig ${cache} --expect hit)

# 4. h5dump through the external link, from another directory: decoded with
# the installed plugin, not without it.
set(dataset /${model_info}/${func}/compiled_module)
execute_process(COMMAND ${CMAKE_COMMAND} -E env HDF5_PLUGIN_PATH=${WORK_DIR}/no-plugins
                ${H5DUMP} -d ${dataset} ${index} WORKING_DIRECTORY ${WORK_DIR}/elsewhere
                OUTPUT_VARIABLE no_plugin ERROR_VARIABLE no_plugin)
expect("h5dump without the plugin (must fail to decode)" "${no_plugin}" "unable to print data")
run("h5dump with the installed plugin" dump COMMAND ${CMAKE_COMMAND} -E env HDF5_PLUGIN_PATH=${plugin_dir}
    ${H5DUMP} -d ${dataset} ${index} WORKING_DIRECTORY ${WORK_DIR}/elsewhere)
expect("h5dump" "${dump}" "DATASET \"${dataset}\"")
expect("h5dump" "${dump}" "DATA {\n *\\(0\\): [0-9]")
if(dump MATCHES "unable|error")
  message(FATAL_ERROR "h5dump reported an error:\n${dump}")
endif()
run("h5dump -b with the installed plugin" _ COMMAND ${CMAKE_COMMAND} -E env HDF5_PLUGIN_PATH=${plugin_dir}
    ${H5DUMP} -d ${dataset} -b NATIVE -o ${WORK_DIR}/dump.bin ${index} WORKING_DIRECTORY ${WORK_DIR}/elsewhere)

# 5. h5py and xxhash (the first interpreter that has both).
set(python "")
foreach(p ${PYTHONS})
  execute_process(COMMAND ${p} -c "import h5py, xxhash" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(python ${p})
    break()
  endif()
endforeach()
if(NOT python)
  message(FATAL_ERROR "none of ${PYTHONS} imports h5py and xxhash: install python3-h5py and python3-xxhash "
                      "(scripts/install-deps.sh)")
endif()
run("h5py reads every object (${python})" _ COMMAND ${CMAKE_COMMAND} -E env HDF5_PLUGIN_PATH=${plugin_dir}
    ${python} ${SOURCE_DIR}/check_objects.py ${cache} ${model_info}/${func} ${WORK_DIR}/dump.bin
    WORKING_DIRECTORY ${WORK_DIR}/elsewhere)

# 6. The launchers, installed next to npucache, run it.
run("npucache-warmup --help" help COMMAND ${prefix}/${BINDIR}/npucache-warmup --help)
expect("npucache-warmup --help" "${help}" "npucache-warmup --tp 2 --pp 4")
run("npucache-infer --help" help COMMAND ${prefix}/${BINDIR}/npucache-infer --help)
expect("npucache-infer --help" "${help}" "npucache-infer --tp 2 --pp 4")
set(job_env ${asan_env} NPUCACHE_LOG_LEVEL=warn)
run("npucache-warmup on 2 ranks" warm COMMAND ${CMAKE_COMMAND} -E env ${job_env}
    ${prefix}/${BINDIR}/npucache-warmup --tp 2 --pp 1 --cache-dir ${WORK_DIR}/job-cache --autotune-candidates 1
    WORKING_DIRECTORY ${WORK_DIR}/elsewhere)
expect("npucache-warmup" "${warm}" "== warmup: world 2 on 1 host, tp 2, pp 1")
run("npucache-infer on 2 ranks" infer COMMAND ${CMAKE_COMMAND} -E env ${job_env}
    ${prefix}/${BINDIR}/npucache-infer --tp 2 --pp 1 --cache-dir ${WORK_DIR}/job-cache --tokens 4 --autotune-candidates 1
    WORKING_DIRECTORY ${WORK_DIR}/elsewhere)
expect("npucache-infer" "${infer}" "warm +4 of 4 rank-methods")
expect("npucache-infer" "${infer}" "served +4 hit_local, 0 hit_remote")
expect("npucache-infer" "${infer}" "tokens equal the single-process eager result: yes")

# 7. The man page and the docs.
set(page ${prefix}/${MANDIR}/man1/npucache.1)
find_program(MAN man)
if(NOT MAN)
  message(FATAL_ERROR "man not found: install man-db (scripts/install-deps.sh)")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env MANWIDTH=80 LC_ALL=C ${MAN} --warnings -l -P cat ${page}
                RESULT_VARIABLE rc OUTPUT_VARIABLE man_out ERROR_VARIABLE man_err)
if(NOT rc EQUAL 0 OR NOT man_err STREQUAL "")
  message(FATAL_ERROR "man -l ${page} failed (${rc}) or warned:\n${man_err}")
endif()
expect("man -l npucache.1" "${man_out}" "NAME\n +npucache - compile-cache coordinator")
expect("man -l npucache.1" "${man_out}" "--plugin-path")
expect("man -l npucache.1" "${man_out}" "\n   verify\n")
foreach(doc README.md LICENSE GUIDE.md examples/CMakeLists.txt)
  if(NOT EXISTS ${prefix}/${DOCDIR}/${doc})
    message(FATAL_ERROR "${DOCDIR}/${doc} was not installed")
  endif()
endforeach()
message("-- the installed package works from ${prefix}")
