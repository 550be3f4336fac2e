#!/usr/bin/env bash
# ctest mpi_warmup_llama3_8b: Llama-3-8B shapes (the shipped config) warmed
# up under mpirun with tp=2 x pp=2 (4 ranks) and meta weights, bounded in
# time and memory, then warmed again from the cache:
#   - the cold job compiles each unique subgraph once (2 stage kinds x 2
#     methods = 4 compiles) and stores one artifact per unique subgraph;
#   - every rank stays under 1 GiB of peak resident memory (no weights);
#   - kernels are tuned once per signature: a compiled stage (16 layers of
#     7 matmuls and their fused kernels) times at most 16 kernels, not one
#     per layer, or none when it took its layer region compiled by another
#     rank; each unique region is compiled once per job; the report counts
#     them;
#   - a second job is served from the cache on every rank (hits, no
#     compiles), in a fraction of the cold job's time.
#   warmup_real_shapes.sh NPUCACHE_BINARY LAUNCH_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NPUCACHE_BINARY LAUNCH_DIR" >&2; exit 2; }
bin="$1"
launch="$2"
work="$(mktemp -d /tmp/npucache-real-XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

job() {  # job NAME: bounded 4-rank warmup of llama-3-8b with a short KV cache
  NPUCACHE_LOG_LEVEL=warn timeout --kill-after=10 400 "$launch/warmup.sh" --tp 2 --pp 2 --model llama-3-8b \
    --max-seq 64 --autotune-candidates 2 --cache-dir "$work/cache" --npucache "$bin" \
    --report-json "$work/$1.json" > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "job $1 failed"; }
}

job cold
cat "$work/cold.log"
job warm
python3 - "$work" <<'EOF' || fail "report checks"
import json, os, sys
w = sys.argv[1]
cold = json.load(open(f"{w}/cold.json"))
warm = json.load(open(f"{w}/warm.json"))
problems = []
def check(ok, what):
    if not ok:
        problems.append(what)
check(cold["model"] == "llama-3-8b" and cold["weights"] == "meta", f"model {cold['model']}, weights {cold['weights']}")
check(cold["unique_subgraphs"] == 4, f"{cold['unique_subgraphs']} unique subgraphs, want 4")
check(cold["compiled"] == cold["unique_subgraphs"], f"{cold['compiled']} compiles for {cold['unique_subgraphs']} unique subgraphs")
objects = len(os.listdir(f"{w}/cache/objects"))
check(objects == cold["unique_subgraphs"], f"{objects} objects stored for {cold['unique_subgraphs']} unique subgraphs")
check(cold["max_peak_rss_bytes"] < 1 << 30, f"peak RSS {cold['max_peak_rss_bytes'] / 2**20:.0f} MiB, want < 1024 MiB")
for p in cold["per_rank"]:
    for m in p["methods"]:
        if m["compiled"]:
            # At most 16 kernels timed; none when its layer region came
            # compiled (tuned) from the rank that compiled it first and the
            # rest from the tuning table.
            check(m["kernels_tuned"] <= 16, f"rank {p['rank']} {m['method']}: {m['kernels_tuned']} kernels tuned")
            check(m["kernels_tuned"] > 0 or (m["regions_reused"] > 0 and m["regions_compiled"] == 0),
                  f"rank {p['rank']} {m['method']}: 0 kernels tuned and no region taken compiled")
regions = len(os.listdir(f"{w}/cache/regions"))
check(cold["regions_compiled"] == regions, f"{cold['regions_compiled']} regions compiled for {regions} stored (once per job)")
check(cold["kernels_tuned"] > 0, "the job tuned no kernel")
methods = [m for p in warm["per_rank"] for m in p["methods"]]
check(all(m["hit"] for m in methods) and warm["compiled"] == 0, f"warm job: {warm['compiled']} compiles, {sum(m['hit'] for m in methods)} of {len(methods)} hits")
check(warm["wall_s"] * 3 < cold["wall_s"], f"warm {warm['wall_s']:.2f} s is not under a third of cold {cold['wall_s']:.2f} s")
print(f"llama-3-8b tp=2 pp=2: cold {cold['wall_s']:.2f} s ({cold['compiled']} compiles), warm {warm['wall_s']:.3f} s "
      f"({cold['wall_s'] / warm['wall_s']:.0f}x), peak RSS {cold['max_peak_rss_bytes'] / 2**20:.0f} MiB per rank")
for p in problems:
    print("FAIL:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
