# Interface targets every project target links: language settings, warnings
# and the optional sanitizer instrumentation.
add_library(npucache_settings INTERFACE)
target_compile_features(npucache_settings INTERFACE cxx_std_20)

add_library(npucache_warnings INTERFACE)
target_compile_options(npucache_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wimplicit-fallthrough)
# GCC 12 reports -Wrestrict false positives inside libstdc++'s
# std::string operator+ (GCC bug 105651); they say nothing about our code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(npucache_warnings INTERFACE -Wno-restrict)
endif()

# A unity build #includes each source file into its batch, so GCC takes the
# anonymous-namespace fixtures of a test file for a header's and warns that a
# test derived from one has a base of internal linkage: true of every
# GoogleTest fixture in an anonymous namespace, and harmless.
if(NPUCACHE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(npucache_warnings INTERFACE -Wno-subobject-linkage)
endif()
# Links with LLVM's lld when the compiler can (Debian's `lld`, which
# scripts/install-deps.sh installs): a test program of the ASan build
# links in 1.5 s of CPU with it against 3.8 s with GNU ld, and the three
# builds of .ci/run link about a hundred programs and libraries. Off, or
# with no lld, the system's default linker links as before.
option(NPUCACHE_LLD "Link with lld (-fuse-ld=lld) when the compiler accepts it" ON)
if(NPUCACHE_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld NPUCACHE_HAVE_LLD)
  if(NPUCACHE_HAVE_LLD)
    target_link_options(npucache_settings INTERFACE -fuse-ld=lld)
  endif()
endif()

# CI builds with NPUCACHE_WERROR, so a warning fails the run instead of
# scrolling past in a build log (three -Wshadow warnings of src/nn had);
# a user's build of a newer compiler with new warnings still builds.
option(NPUCACHE_WERROR "Treat the project's warnings as errors (CI)" OFF)
if(NPUCACHE_WERROR)
  target_compile_options(npucache_warnings INTERFACE -Werror)
endif()

# NPUCACHE_UBSAN_LIGHT (CI's ASan build): UBSan's type-mismatch checks
# (null, alignment) and its vptr and pointer-overflow checks instrument
# every load, store and member call; at -O0 they are most of UBSan's
# compile time (a batch of the coordinator under ASan+UBSan: 68 s of wall
# with them, 38 s without). With the option they are left out everywhere
# but in the layers that decode bytes from outside the process
# (NPUCACHE_DECODER_LAYERS, src/CMakeLists.txt: npucache_decoder_checks),
# which the fuzzing and the decoder tests run; ASan still stops at a null
# dereference. Off by default: `NPUCACHE_SANITIZE=address` and
# scripts/long.sh keep every check everywhere.
option(NPUCACHE_UBSAN_LIGHT "ASan+UBSan: leave UBSan's null, alignment, vptr and pointer-overflow checks to the decoding layers" OFF)
set(NPUCACHE_UBSAN_HEAVY_CHECKS null,alignment,vptr,pointer-overflow)
add_library(npucache_decoder_checks INTERFACE)
if(NPUCACHE_SANITIZE STREQUAL "address")
  set(_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  if(NPUCACHE_UBSAN_LIGHT)
    list(APPEND _san -fno-sanitize=${NPUCACHE_UBSAN_HEAVY_CHECKS})
    target_compile_options(npucache_decoder_checks INTERFACE -fsanitize=${NPUCACHE_UBSAN_HEAVY_CHECKS})
  endif()
elseif(NPUCACHE_SANITIZE STREQUAL "thread")
  set(_san -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT NPUCACHE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "NPUCACHE_SANITIZE must be '', 'address' or 'thread', not '${NPUCACHE_SANITIZE}'")
endif()
if(_san)
  target_compile_options(npucache_settings INTERFACE ${_san})
  target_link_options(npucache_settings INTERFACE ${_san})
  # Sanitizer builds at -O0 with line tables only (these come after the
  # build type's flags, and the last -O and -g win): a batch of the cache
  # layer compiles under ASan+UBSan in 42 s of CPU at -O0 against 76 s at
  # -O1, and CI builds the library twice this way for a few minutes of
  # tests; the sanitizers' reports still name files and lines. Their tests
  # are chosen by label (cmake/Tests.cmake).
  target_compile_options(npucache_settings INTERFACE -O0 -g1)
endif()

# The tests' own code (test programs, workers, fuzzers) compiles at -O1 in
# an optimized build: what they test, the library, keeps the build type's
# flags, while a batch of GoogleTest cases compiles in half the CPU of -O3
# (a batch of tests/cache/test_serving.cpp: 12 s against 24 s; -O0 takes
# 8 s but leaves the inline templates of the public headers that tests
# instantiate, a decode loop's calls among them, unoptimized). Sanitizer
# builds keep their -O0 above.
add_library(npucache_test_code INTERFACE)
if(NOT _san AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  target_compile_options(npucache_test_code INTERFACE -O1)
endif()

# The library's control code (every layer but the kernels: the cache,
# storage, formats, coordination, tracing, compiling, the command)
# compiles at -O2 in a Release build, the kernels keep the build type's
# -O3. -O3's extra inlining, unrolling and vectorizing speed loops over
# numbers, and the kernels' loops are where the arithmetic runs (the
# matmuls a job runs and the autotuner times); in code of maps, strings
# and serialization it costs compile CPU and buys nothing measurable: a
# batch of the storage layer compiles in 54 s at -O2 against 72 s at -O3,
# while a warm start and a decode step run as fast (docs/ARCHITECTURE.md,
# "Optimization levels", has the figures). Other build types keep their
# flags, and sanitizer builds their -O0 above.
add_library(npucache_control_code INTERFACE)
if(NOT _san AND CMAKE_BUILD_TYPE STREQUAL "Release")
  target_compile_options(npucache_control_code INTERFACE -O2)
endif()
