#!/usr/bin/env bash
# The metrics file read by a real Prometheus (ctest prometheus_scrape): a
# serving process writes NPUCACHE_METRICS_FILE into a textfile directory;
# `promtool check metrics` accepts it and `npucache stats --format
# prometheus`; prometheus-node-exporter's textfile collector exposes it and
# a prometheus server scraping the exporter every second answers
# npucache_compiles_total with the cache's own count. Bounded to a few
# seconds; everything started is stopped on exit.
#   prometheus_scrape.sh NPUCACHE SERVE_WORKER
set -euo pipefail
cli=$1
serve=$2
for p in promtool prometheus prometheus-node-exporter; do
  command -v "$p" >/dev/null || { echo "FAIL: $p is not installed: scripts/install-deps.sh installs it" >&2; exit 1; }
done
work=$(mktemp -d /tmp/npucache-prometheus.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done  # throwaway servers: no graceful stop
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
mkdir -p "$work/textfile"
prom_file="$work/textfile/npucache.prom"

# A cold serving process: it compiles, and writes the file at exit.
NPUCACHE_METRICS_FILE="$prom_file" NPUCACHE_METRICS_INTERVAL=1 "$serve" "$work/cache" --batches 4,8 \
  >"$work/serve.log" 2>&1 || fail "the serving process failed"
[ -f "$prom_file" ] || fail "no metrics file written"
ls "$work/textfile" | grep -v '^npucache.prom$' && fail "a temporary file was left beside the metrics file"
promtool check metrics <"$prom_file" || fail "promtool rejects the metrics file: $(cat "$prom_file")"
"$cli" stats "$work/cache" --format prometheus >"$work/stats.prom"
promtool check metrics <"$work/stats.prom" || fail "promtool rejects stats --format prometheus: $(cat "$work/stats.prom")"
grep -Eq '^npucache_cache_bytes\{kind="stored"\} [1-9][0-9]*$' "$work/stats.prom" || fail "no stored bytes: $(cat "$work/stats.prom")"
want=$("$cli" stats "$work/cache" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["compiled"])')
[ "$want" -gt 0 ] || fail "the cold process compiled nothing"
grep -qx "npucache_compiles_total $want" "$prom_file" || fail "the metrics file does not say $want compiles: $(cat "$prom_file")"

# node_exporter's textfile collector, and a prometheus server scraping it.
nport=$(free_port)
prometheus-node-exporter --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$work/textfile" --web.listen-address="127.0.0.1:$nport" >"$work/node.log" 2>&1 &
pids+=($!)
pport=$(free_port)
cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:$nport']
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
pids+=($!)
got=""
for _ in $(seq 60); do  # at most about 15 s
  got=$(curl -s "http://127.0.0.1:$pport/api/v1/query?query=npucache_compiles_total" 2>/dev/null |
    python3 -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true)
  [ -n "$got" ] && break
  sleep 0.25
done
[ "$got" = "$want" ] || fail "prometheus answered npucache_compiles_total '$got', the cache says $want"
hits=$(curl -s "http://127.0.0.1:$pport/api/v1/query?query=npucache_hits_total" |
  python3 -c 'import json,sys; print(sorted(m["metric"]["source"] for m in json.load(sys.stdin)["data"]["result"]))')
[ "$hits" = "['local', 'other_layout', 'rank', 'remote']" ] || fail "hit sources as scraped: $hits"
echo "prometheus_scrape: ok (npucache_compiles_total $got)"
