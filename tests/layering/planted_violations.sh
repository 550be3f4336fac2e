#!/usr/bin/env bash
# The layering check must fail on each planted wrong include: a copy of the
# tree gets one bad include at a time and check_layers.py must reject it
# (and accept the unmodified copy).
#   planted_violations.sh REPO_ROOT
set -euo pipefail
root="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$root/src" "$root/include" "$root/scripts" "$work/"
python3 "$work/scripts/check_layers.py" "$work" >/dev/null
plant() {  # file line description
  local file="$1" line="$2" what="$3"
  cp "$work/$file" "$work/$file.orig"
  printf '%s\n' "$line" | cat - "$work/$file.orig" > "$work/$file"
  if python3 "$work/scripts/check_layers.py" "$work" >/dev/null 2>"$work/err"; then
    echo "not detected: $what ($file: $line)" >&2
    exit 1
  fi
  grep -q "layering violation" "$work/err" || { echo "no violation reported for: $what" >&2; exit 1; }
  mv "$work/$file.orig" "$work/$file"
  echo "detected: $what"
}
plant src/compiler/compile_graph.cpp '#include "storage/store.h"' "compiler including the cache's storage"
plant src/compiler/executor.cpp '#include "nn/detail/tensor_impl.h"' "a private header of another layer"
plant src/nn/tensor.cpp '#include "runtime/kernels/kernel_util.h"' "a kernel header outside the runtime"
plant src/runtime/device.cpp '#include <mpi.h>' "<mpi.h> outside src/mpi"
plant src/coord/plan.cpp '#include <hdf5.h>' "<hdf5.h> outside src/h5"
plant src/format/index_file.cpp '#include <hdf5.h>' "<hdf5.h> in the entry formats (they use the wrapper, h5/h5.h)"
plant src/admin/admin.cpp '#include <H5Apublic.h>' "an HDF5 header in cache administration"
plant src/format/bundle.cpp '#include <zstd.h>' "<zstd.h> outside src/zstd"
plant src/storage/store.cpp '#include "cache/method_cache.h"' "storage including the method cache above it"
plant src/format/records.cpp '#include "storage/dir.h"' "an entry format including storage"
plant src/cache/method_cache.cpp '#include "admin/admin.h"' "the method cache including administration"
plant src/cache/method_cache.cpp '#include <npucache/coordinator.h>' "the cache including the coordinator's API"
plant include/npucache/tensor.h '#include <npucache/cache.h>' "a public nn header including the cache API"
plant src/ir/graph.cpp '#include "mpi/comm.h"' "the IR including MPI"
