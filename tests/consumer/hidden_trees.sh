#!/bin/bash
# The installed package on its own (ctest install_hidden_trees): installs the
# build tree into a scratch prefix outside both trees, then, in a private
# mount namespace (unshare --mount) with empty read-only directories bound
# over the source tree and the build tree, so that nothing can read them and
# nothing running beside the test sees the mounts, uses only the prefix:
#   1. no installed file names the source or the build tree, and the
#      installed README and GUIDE name no source-tree path (build/, configs/,
#      examples/, launch/, scripts/, src/, tests/, perf/, docs/, ...) and
#      speak of torch.compile's, TorchAir's and PyTorch's features by their
#      names, never of "seeds" (but of random seeds);
#   2. the installed npucache finds the shipped model configs in the
#      installed data directory (and names no other place when a name is
#      unknown);
#   3. every example the installed docs name is installed, and the installed
#      examples build with their own CMakeLists.txt against the prefix and
#      run cold then warm (torchair_model, transformer_block, and tp_pp on
#      4 ranks);
#   4. the installed README's complete C++ programs ("compile without
#      weights") build as written with find_package(npucache COMPONENTS
#      models) and run (llama-3-8b with meta weights on 2 ranks, its config
#      found by name); an unknown component fails with a message naming it;
#   5. pkg-config gives no -std flag, and a program built with -std=c++20
#      and pkg-config alone (its run path from pkg-config's Libs) sees the
#      version macros, matching the library it runs
#      with, whose soname is libnpucache.so.<NPUCACHE_SOVERSION>.
# Every step is bounded (timeout); the scratch prefix is removed at the end.
#
#   hidden_trees.sh SOURCE_DIR BUILD_DIR CXX PKG_CONFIG SOVERSION MPIEXEC [MPIEXEC_FLAG...]
# Environment: CONSUMER_FLAGS (a sanitizer build's compile and link flags).
set -euo pipefail

# fail MESSAGE: a check failed; the test goes on to the next checks (a
# failed step's later checks may fail too) and exits 1 at the end.
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# passed MESSAGE: printed while no check has failed.
passed() { if ((failures == 0)); then echo "$*"; fi; }
# fatal MESSAGE: a failure after which nothing can be checked.
fatal() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "-- $*"; }
# bounded COMMAND...: runs it with a time limit and its output shown.
bounded() { timeout --kill-after=5 240 "$@"; }

if [[ "${1:-}" != --inside ]]; then
  [[ $# -ge 6 ]] || fatal "usage: hidden_trees.sh SOURCE_DIR BUILD_DIR CXX PKG_CONFIG SOVERSION MPIEXEC [FLAG...]"
  source_dir=$(realpath "$1")
  build_dir=$(realpath "$2")
  work=$(mktemp -d /tmp/npucache-hidden.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  step "installing $build_dir into $work/prefix"
  bounded cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log" ||
    { cat "$work/install.log"; fatal "cmake --install failed"; }
  # The namespace runs a copy of this script: the original is in the
  # source tree, which is about to be hidden.
  cp "$0" "$work/hidden_trees.sh"
  unshare_args=(--mount --propagation private)
  [[ $EUID -eq 0 ]] || unshare_args+=(--user --map-root-user)
  unshare "${unshare_args[@]}" bash "$work/hidden_trees.sh" --inside "$work" "$@"
  echo "-- the installed package works with the source and build trees hidden"
  exit 0
fi

# ---- inside the private mount namespace
shift
work=$1 source_dir=$(realpath "$2") build_dir=$(realpath "$3") cxx=$4 pkg_config=$5 soversion=$6 mpiexec=$7
shift 7
mpi_flags=("$@")
prefix=$work/prefix
flags=(${CONSUMER_FLAGS:-})
mkdir -p "$work/empty"
# The build tree first: it may lie inside the source tree.
for tree in "$build_dir" "$source_dir"; do
  mount --bind "$work/empty" "$tree"
  mount -o remount,bind,ro "$work/empty" "$tree"
done
# (the build tree inside the source tree is then not there at all)
[[ -z "$(ls -A "$source_dir")" && -z "$(ls -A "$build_dir" 2> /dev/null)" ]] || fatal "the trees are not hidden"
# Nothing from the environment may point the package elsewhere.
unset NPUCACHE_CONFIG_PATH NPUCACHE_CACHE_DIR HDF5_PLUGIN_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH LD_LIBRARY_PATH
export NPUCACHE_LOG_LEVEL=info OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=detect_leaks=0
cd "$work"

step "1. no installed file names the source or the build tree"
if hits=$(grep -rlF -e "$source_dir" -e "$build_dir" "$prefix"); then
  fail "installed files naming the source or build tree:"$'\n'"$hits"
fi
docdir=$prefix/share/doc/npucache
for doc in README.md GUIDE.md; do
  [[ -f $docdir/$doc ]] || fail "$docdir/$doc was not installed"
  if hits=$(grep -nE '(^|[[:space:]`(\[])(\./)?(build|build-[a-z]+|configs|examples|launch|scripts|src|tests|perf|docs|cmake)/' \
    "$docdir/$doc"); then
    fail "the installed $doc names source-tree paths:"$'\n'"$hits"
  fi
  if grep -n -e '<!--' -e '-->' -e '@PREFIX@' "$docdir/$doc"; then fail "the installed $doc keeps markup"; fi
  # PyTorch's and TorchAir's features by their names: "seed" only as a
  # random generator's (a random seed, --seed N, seed 1).
  if hits=$(grep -niwE "seeds?|seed's" "$docdir/$doc" | grep -viE "random[- ]seeds?|--seed|seed [0-9]|seed=[0-9]"); then
    fail "the installed $doc speaks of seeds, not of the features' names:"$'\n'"$hits"
  fi
  grep -qF "$prefix/" "$docdir/$doc" || fail "the installed $doc names no installed place"
done
for place in "$prefix/share/npucache/configs/llama-3-8b.json" "$docdir/examples/CMakeLists.txt" \
  "$docdir/examples/torchair_model.cpp"; do
  [[ -f $place ]] || fail "$place, which the installed README names, is missing"
  grep -qF "$(dirname "$place")" "$docdir/README.md" || fail "the installed README does not name $(dirname "$place")"
done
# Every example the installed docs name is installed (and built in step 3).
named_examples=$(grep -ohE "$docdir/examples/[a-z_]+\.cpp|ex/[a-z_]+ " "$docdir/README.md" "$docdir/GUIDE.md" |
  sed -E 's#.*/##; s/\.cpp$//; s/ $//' | sort -u)
[[ -n $named_examples ]] || fail "the installed docs name no example"
for ex in $named_examples; do
  [[ -f $docdir/examples/$ex.cpp ]] || fail "the installed docs name the example $ex, which is not installed"
done

step "2. the installed npucache finds the installed configs"
bounded "$prefix/bin/npucache" warmup --tp 1 --pp 1 --model llama-3-8b --check-args ||
  fail "npucache warmup --model llama-3-8b --check-args failed"
if out=$(bounded "$prefix/bin/npucache" warmup --tp 1 --pp 1 --model no-such-model --check-args 2>&1); then
  fail "an unknown model was accepted: $out"
fi
echo "$out"
[[ $out == *"searched $prefix/share/npucache/configs;"* ]] ||
  fail "the unknown model's error does not name exactly the installed configs directory as searched"

step "3. the installed examples against the prefix"
bounded cmake -S "$docdir/examples" -B "$work/ex" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  "-DCMAKE_CXX_FLAGS=${flags[*]}" "-DCMAKE_EXE_LINKER_FLAGS=${flags[*]}" > "$work/ex.log" 2>&1 ||
  { cat "$work/ex.log"; fail "configuring the installed examples failed"; }
bounded cmake --build "$work/ex" -j2 > "$work/ex.log" 2>&1 || { cat "$work/ex.log"; fail "building the examples failed"; }
for ex in $named_examples; do [[ -x $work/ex/$ex ]] || fail "the installed example $ex was not built"; done
# expect WHAT OUTPUT PATTERN...: every pattern (grep -E) is in OUTPUT.
expect() {
  local what=$1 out=$2
  shift 2
  for re in "$@"; do
    grep -qE -- "$re" <<< "$out" || fail "$what: no line matches '$re' in:"$'\n'"$out"
  done
}
for ex in torchair_model transformer_block; do
  cold=$(bounded "$work/ex/$ex" "$work/cache-$ex" 2>&1) || fail "$ex, cold: $cold"
  expect "$ex, cold" "$cold" "prompt: compiled" "decode: compiled"
  warm=$(bounded "$work/ex/$ex" "$work/cache-$ex" 2>&1) || fail "$ex, warm: $warm"
  expect "$ex, warm" "$warm" "prompt: hit \(compiles 0\)" "decode: hit \(compiles 0\)"
  passed "$ex: cold compiled, warm hit"
done
for run in cold warm; do
  out=$(bounded "$mpiexec" -n 4 "${mpi_flags[@]}" "$work/ex/tp_pp" "$work/cache-tp_pp" 2>&1) || fail "tp_pp, $run: $out"
  expect "tp_pp, $run" "$out" "equal the eager ones on every rank"
done
expect "tp_pp, warm" "$out" "prompt: hit on 4 of 4 ranks" "decode: hit on 4 of 4 ranks"
passed "tp_pp: cold and warm on 4 ranks"

step "4. the installed README's complete programs, as written"
mkdir -p "$work/readme"
# Every ```cpp block that starts with an #include is a complete program.
awk -v dir="$work/readme" '
  /^```cpp$/ { inside = 1; n++; text = ""; next }
  /^```$/ && inside { inside = 0; if (text ~ /^#include/) { f = dir "/snippet" n ".cpp"; printf "%s", text > f; close(f) } next }
  inside { text = text $0 "\n" }' "$docdir/README.md"
snippets=("$work"/readme/snippet*.cpp)
if [[ ! -f ${snippets[0]} ]]; then
  fail "the installed README has no complete C++ program (a \`\`\`cpp block starting with #include)"
else
  grep -l "Weights::meta" "${snippets[@]}" > /dev/null || fail "the README's compile-without-weights program is not complete"
  {
    echo 'cmake_minimum_required(VERSION 3.20)'
    echo 'project(readme CXX)'
    echo 'find_package(npucache 0.2 REQUIRED COMPONENTS models)'
    for s in "${snippets[@]}"; do
      n=$(basename "$s" .cpp)
      echo "add_executable($n $s)"
      echo "target_link_libraries($n npucache::npucache npucache::models)"
    done
  } > "$work/readme/CMakeLists.txt"
  bounded cmake -S "$work/readme" -B "$work/readme/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
    "-DCMAKE_CXX_FLAGS=${flags[*]}" "-DCMAKE_EXE_LINKER_FLAGS=${flags[*]}" > "$work/readme.log" 2>&1 ||
    { cat "$work/readme.log"; fail "find_package(npucache COMPONENTS models) failed"; }
  bounded cmake --build "$work/readme/build" -j2 > "$work/readme.log" 2>&1 ||
    { cat "$work/readme.log"; fail "the README's programs do not compile as written"; }
  for s in "${snippets[@]}"; do
    if grep -q "Weights::meta" "$s"; then
      n=$(basename "$s" .cpp)
      out=$(bounded "$mpiexec" -n 2 "${mpi_flags[@]}" "$work/readme/build/$n" llama-3-8b 2 1 "$work/cache-readme" 2>&1) ||
        fail "the README's compile-without-weights program failed: $out"
      expect "the README's compile-without-weights program" "$out" "rank 0: prompt compiled" "rank 1: prompt fetched"
      passed "the README's compile-without-weights program: llama-3-8b on 2 ranks compiled and cached"
    fi
  done
fi
mkdir -p "$work/bogus"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(bogus CXX)\nfind_package(npucache REQUIRED COMPONENTS models bogus)\n' \
  > "$work/bogus/CMakeLists.txt"
if out=$(bounded cmake -S "$work/bogus" -B "$work/bogus/build" -DCMAKE_PREFIX_PATH="$prefix" 2>&1); then
  fail "find_package(npucache COMPONENTS bogus) succeeded"
fi
expect "find_package(npucache COMPONENTS bogus)" "$out" "npucache has no component 'bogus' \(its components: models\)"
passed "an unknown component: $(grep -o "npucache has no component[^;]*" <<< "$out")"

step "5. pkg-config, the version macros and the soname"
pc=$(find "$prefix" -name npucache.pc)
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH=$libdir/pkgconfig
cflags=$("$pkg_config" --cflags npucache npucache-models)
[[ $cflags != *-std=* ]] || fail "pkg-config --cflags sets the standard: $cflags"
cat > "$work/version.cpp" << 'EOF'
#include <npucache/version.h>

#include <cstdio>
#include <cstring>

static_assert(NPUCACHE_VERSION_AT_LEAST(NPUCACHE_VERSION_MAJOR, NPUCACHE_VERSION_MINOR, NPUCACHE_VERSION_PATCH));
static_assert(NPUCACHE_VERSION_AT_LEAST(0, 1, 0));
static_assert(!NPUCACHE_VERSION_AT_LEAST(NPUCACHE_VERSION_MAJOR, NPUCACHE_VERSION_MINOR, NPUCACHE_VERSION_PATCH + 1));
static_assert(!NPUCACHE_VERSION_AT_LEAST(NPUCACHE_VERSION_MAJOR + 1, 0, 0));

int main() {
  std::printf("headers %s (%d.%d.%d), soversion %s, library %s\n", NPUCACHE_VERSION, NPUCACHE_VERSION_MAJOR,
              NPUCACHE_VERSION_MINOR, NPUCACHE_VERSION_PATCH, NPUCACHE_SOVERSION, npucache::version());
  return std::strcmp(NPUCACHE_VERSION, npucache::version()) == 0 ? 0 : 1;
}
EOF
# shellcheck disable=SC2046
bounded "$cxx" "${flags[@]}" -std=c++20 "$work/version.cpp" $("$pkg_config" --cflags --libs npucache) \
  -o "$work/version" || fail "building with -std=c++20 and pkg-config failed"
out=$("$work/version") || fail "the headers' version differs from the library's: $out"
echo "$out"
[[ $out == *"soversion $soversion,"* ]] || fail "NPUCACHE_SOVERSION is not $soversion: $out"
for lib in libnpucache libnpucache_models; do
  soname=$(readelf -d "$libdir/$lib.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [[ $soname == "$lib.so.$soversion" ]] || fail "$lib's soname is '$soname', not $lib.so.$soversion"
  [[ -e $libdir/$soname ]] || fail "$libdir/$soname is missing"
  passed "$lib: soname $soname"
done
if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
