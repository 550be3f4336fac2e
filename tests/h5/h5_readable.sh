#!/usr/bin/env bash
# ctest h5_readable: the HDF5 files of the demo's cache read well.
#   h5_readable.sh LAUNCH_DIR NPUCACHE_BINARY PLUGIN_DIR
# The demo's cold warmup (tiny-llama, tp=2 x pp=4, 8 ranks) into a fresh
# cache, then:
# - `h5dump -H -A` of all its files is at most 3,652 lines (half of the
#   7,304 of format 1, which kept every number as a string and most facts
#   twice);
# - no object file holds dead space (h5stat's unaccounted space beyond
#   the string attributes' heap);
# - numbers are HDF5 integers and floats, booleans an enum, the graph text
#   UTF-8 strings that read without padding (h5py reads the types);
# - no fact is stored twice for one entry: the entry's attributes, its
#   index's root attributes and its object's attributes share no name but
#   graph_key (the link) and date (when each was written).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 LAUNCH_DIR NPUCACHE_BINARY PLUGIN_DIR" >&2; exit 2; }
launch="$1"
npucache="$2"
export HDF5_PLUGIN_PATH="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

NPUCACHE_LOG_LEVEL=warn timeout 300 "$launch/warmup.sh" --npucache "$npucache" --tp 2 --pp 4 \
  --cache-dir "$work/cache" --autotune-candidates 2 > "$work/warmup.txt"
lines=0
files=0
for f in "$work"/cache/*.h5 "$work"/cache/objects/*.h5; do
  n="$(h5dump -H -A "$f" | wc -l)"
  lines=$((lines + n))
  files=$((files + 1))
done
echo "h5dump -H -A: $lines lines in $files files"
[ "$files" -ge 8 ] || { echo "FAIL: expected at least 8 files (4 indexes, 4+ objects), found $files" >&2; exit 1; }
[ "$lines" -le 3652 ] || { echo "FAIL: h5dump -H -A gives $lines lines, more than 3,652" >&2; exit 1; }
# No object file holds dead space: what h5stat leaves unaccounted is the
# one 4 KiB global-heap collection of the string attributes, and at most a
# tenth of the file more (the variable-length graph text of earlier formats
# left about twice the text's size: 10,000 bytes of a 21 KB object here).
for f in "$work"/cache/objects/*.h5; do
  read -r dead total < <(h5stat -S "$f" | awk '/Unaccounted space/ {d=$3} /Total space/ {t=$3} END {print d, t}')
  [ "$dead" -le $((4224 + total / 10)) ] || { echo "FAIL: $f: $dead of its $total bytes are dead space" >&2; exit 1; }
done
# The graph text is printed without NUL padding.
obj="$(ls "$work"/cache/objects/*.h5 | head -1)"
if h5dump -d /graph "$obj" | grep -q '\\000'; then
  echo "FAIL: the graph text is padded with NULs" >&2
  exit 1
fi

/usr/bin/python3 - "$work/cache" <<'EOF'
import glob, os, sys
import h5py, numpy as np

cache = sys.argv[1]
problems = []
def kind(v):
    if isinstance(v, (bytes, str)):
        return "str"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (np.integer, int)):
        return "int"
    if isinstance(v, (np.floating, float)):
        return "float"
    return type(v).__name__

want = {"tp_rank": "int", "pp_rank": "int", "raw_size": "int", "compile_time_s": "float",
        "with_program": ("bool", "int"), "dynamic": ("bool", "int"), "ge_cache": ("bool", "int")}
def check_types(where, attrs):
    for name, v in attrs.items():
        k = kind(v)
        if name in want and k not in (want[name] if isinstance(want[name], tuple) else (want[name],)):
            problems.append(f"{where}: {name} is {k}, want {want[name]}")
        if k == "str":
            s = v.decode() if isinstance(v, bytes) else v
            if name in want:
                problems.append(f"{where}: {name} is a string")
            elif s.strip().lstrip("-").replace(".", "", 1).isdigit() and name not in ("code_version", "config", "lookup_key", "graph_key", "canonical_hash", "parameter_signature", "checksum", "runtime_version", "model_info", "generation"):
                problems.append(f"{where}: {name} holds the number {s!r} as a string")

entries = set()
# The bases and their deltas (entries committed since a base was written).
for index in glob.glob(os.path.join(cache, "*.h5")) + glob.glob(os.path.join(cache, "deltas", "*.h5")):
    with h5py.File(index, "r") as f:
        root = dict(f.attrs)
        check_types(index, root)
        def visit(name, obj):
            if isinstance(obj, h5py.Group) and "graph_key" in obj.attrs:
                entries.add(name)
                attrs = dict(obj.attrs)
                check_types(f"{index}:/{name}", attrs)
                key = attrs["graph_key"]
                key = key.decode() if isinstance(key, bytes) else key
                with h5py.File(os.path.join(cache, "objects", key + ".h5"), "r") as o:
                    oattrs = dict(o.attrs)
                    check_types(key, oattrs)
                    twice = (set(attrs) & set(root)) | ((set(attrs) | set(root)) & set(oattrs))
                    twice -= {"graph_key", "date", "format", "format_version", "kind"}
                    if twice:
                        problems.append(f"{name}: stored twice: {sorted(twice)}")
                    graph = o["graph"]
                    info = h5py.check_string_dtype(graph.dtype)
                    if info is None or info.encoding != "utf-8":
                        problems.append(f"{key}: graph text is {graph.dtype}, not UTF-8 strings")
                    else:
                        text = [l.decode("utf-8") if isinstance(l, bytes) else l for l in graph[()]]
                        if not text or not text[0].startswith("graph(") or any("\0" in l for l in text):
                            problems.append(f"{key}: graph text reads as {text[:2]}")
        f.visititems(visit)
if len(entries) != 16:
    problems.append(f"expected 16 entries (8 ranks x 2 methods), found {len(entries)}")
for p in problems:
    print("FAIL:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
echo "HDF5 files: types, no duplicates, $lines lines"
