#!/usr/bin/env bash
# Issue #22's benchmark: produce max-rate throughput and p99 of the broker with the
# hdrhistogram recording (B, this commit) against the previous commit's (A), one core each,
# `ringlog-bench --compare` in alternating rounds of the same run (the max-rate workload,
# acks=all). B is scraped for /metrics and /v1/shards once a second during its rounds, as a
# Prometheus server and `shards --watch` would.
#
# usage: scripts/observability-bench.sh RINGLOG_BEFORE RINGLOG_AFTER RINGLOG_BENCH [SECS] [ROUNDS]
# Reports in $OUT (default /tmp/ringlog-observability-bench).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
before=$1 after=$2 bench=$3 secs=${4:-20} rounds=${5:-3}
bench_init obs
bench_out observability

a=$((19100 + RANDOM % 400)) b=$((19600 + RANDOM % 400)) admin=$((20100 + RANDOM % 400))
"$before" serve --data-dir "$work/a" --cores 1 --listen "127.0.0.1:$a" >"$work/a.log" 2>&1 &
pids+=($!)
"$after" serve --data-dir "$work/b" --cores 1 --listen "127.0.0.1:$b" \
  --metrics-listen "127.0.0.1:$admin" >"$work/b.log" 2>&1 &
pids+=($!)
for port in "$a" "$b"; do
  bench_wait_ready "$after" "127.0.0.1:$port" || true
done
# The scrapes of B: /metrics, and the interval view a watching SRE asks for.
( while sleep 1; do
    curl -s "http://127.0.0.1:$admin/metrics" >/dev/null || true
    curl -s "http://127.0.0.1:$admin/v1/shards?interval_ms=100&hot=5" >/dev/null || true
  done ) &
pids+=($!)

echo "== produce: A = previous commit :$a, B = this commit :$b"
"$bench" -b "127.0.0.1:$a" --compare "127.0.0.1:$b" --rounds "$rounds" \
  -w bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml \
  --duration-secs "$secs" --warmup-secs 5 --acks all -o "$out/produce" --quiet | tee "$out/produce.txt"
