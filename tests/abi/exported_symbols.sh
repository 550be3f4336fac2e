#!/usr/bin/env bash
# What the shared libraries export, and that the programs linking the
# internal static libraries load neither of them (ctest exported_symbols;
# src/CMakeLists.txt, cmake/npucache.map):
#   - a library's dynamic symbol table (nm -D --defined-only) holds at most
#     LIMIT symbols, among them EXPECTED (so that an empty or unreadable
#     table fails too), and every one demangles (c++filt) into NAMESPACE:
#     a name of it, or its vtable, type information or thunk -- no std::,
#     fmt::, spdlog::, nlohmann:: or boost:: instantiation, no C name;
#   - a program given with --program (when built) does not load
#     libnpucache.so or libnpucache_models.so (ldd): it holds the static
#     copies, and one copy of each process-wide object.
#
#   exported_symbols.sh NM CXXFILT LIMIT [--library PATH NAMESPACE EXPECTED]... [--program PATH]...
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
[[ $# -ge 3 ]] || {
  echo "usage: exported_symbols.sh NM CXXFILT LIMIT [--library PATH NAMESPACE EXPECTED]... [--program PATH]..." >&2
  exit 2
}
nm=$1 cxxfilt=$2 limit=$3
shift 3
for tool in "$nm" "$cxxfilt"; do
  command -v "$tool" > /dev/null || {
    echo "FAIL: $tool not found (binutils)" >&2
    exit 1
  }
done
failures=0
libraries=0 programs=0

check_library() {
  local lib=$1 ns=$2 expected=$3
  [[ -f $lib ]] || {
    fail "$lib does not exist"
    return
  }
  local mangled demangled n
  # The last field is the name; a symbol version (name@@VERSION) is not part of it.
  if ! mangled=$("$nm" -D --defined-only "$lib" | awk 'NF { sub(/@.*/, "", $NF); print $NF }'); then
    fail "$nm -D --defined-only $lib failed"
    return
  fi
  n=$(grep -c . <<< "$mangled" || true)
  demangled=$("$cxxfilt" <<< "$mangled")
  echo "$lib: $n exported symbols (at most $limit)"
  ((n <= limit)) || fail "$lib exports $n symbols, more than $limit"
  grep -qxF -- "$expected" <<< "$demangled" || fail "$lib does not export $expected"
  # A name of the namespace, or its vtable, type information or thunk.
  local prefix='((typeinfo name|typeinfo|vtable|VTT|construction vtable|virtual thunk|non-virtual thunk|covariant return thunk|guard variable) (for|to) )?'
  local outside
  outside=$(paste -d '\t' <(echo "$mangled") <(echo "$demangled") | awk -F "\t" -v re="^${prefix}${ns}::" '$2 !~ re')
  if [[ -n $outside ]]; then
    fail "$lib exports $(grep -c . <<< "$outside") symbols outside ${ns}:: (mangled, demangled):"$'\n'"$(head -n 40 <<< "$outside")"
  fi
  libraries=$((libraries + 1))
}

check_program() {
  local program=$1 loaded
  # (a partial build, BUILD_TARGETS, may not have made it)
  [[ -f $program ]] || {
    echo "$program: not built, not checked"
    return
  }
  if ! loaded=$(ldd "$program"); then
    fail "ldd $program failed"
    return
  fi
  if grep -E 'libnpucache(_models)?\.so' <<< "$loaded"; then
    fail "$program links the internal static libraries and loads a shared npucache library too"
  fi
  programs=$((programs + 1))
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --library)
      [[ $# -ge 4 ]] || {
        echo "--library needs PATH NAMESPACE EXPECTED" >&2
        exit 2
      }
      check_library "$2" "$3" "$4"
      shift 4
      ;;
    --program)
      [[ $# -ge 2 ]] || {
        echo "--program needs PATH" >&2
        exit 2
      }
      check_program "$2"
      shift 2
      ;;
    *)
      echo "unknown argument $1" >&2
      exit 2
      ;;
  esac
done
((failures == 0)) || exit 1
echo "$libraries libraries export only their namespace; $programs programs load no shared npucache library"
