#!/usr/bin/env bash
# Issue #15's benchmark: barrier injection latency (trigger → cut published) for a group of
# 3 topics × 12 partitions under a 100 MiB/s acks=all produce load, and produce p99 with
# injections against without, in the same run: `ringlog-bench --compare` alternates rounds
# A (no barrier group) and B (a group over the round's 3 topics, cut every second by the
# interval trigger) on one broker.
#
# usage: scripts/barrier-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
# Reports in $OUT (default /tmp/ringlog-barrier-bench): produce.txt (B/A), cuts.txt (the
# injection latency of every cut of the B rounds, ms, with p50/p99/max).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
bin=$1 bench=$2 secs=${3:-30} rounds=${4:-2}
bench_init barrier
bench_out barrier
port=$((19100 + RANDOM % 800))
brokers="127.0.0.1:$port"
"$bin" serve --data-dir "$work/data" --listen "$brokers" --cores 2 >"$work/broker.log" 2>&1 &
pids+=($!)
bench_wait_ready "$bin" "$brokers" || true

# The B rounds' topics get a barrier group as soon as they exist (cut every 1 s); the
# cuts of each group are listed when its topics are gone (the run ended).
: >"$work/groups"
( while sleep 0.2; do
    "$bin" topic list --brokers "$brokers" --json 2>/dev/null | python3 -c '
import json, re, sys
names = [t["topic"] for t in json.load(sys.stdin)]
runs = {}
for n in names:
    m = re.match(r".*-b\d+-([0-9a-f]{8})-t\d+$", n)
    if m:
        runs.setdefault(m.group(1), []).append(n)
for tag, ts in runs.items():
    if len(ts) == 3:
        print(tag, ",".join(sorted(ts)))
' | while read -r tag topics; do
      grep -q "^$tag$" "$work/groups" && continue
      "$bin" barrier define "cut-$tag" --topics "$topics" --interval 1s --retained-cuts 10000 \
        --brokers "$brokers" >/dev/null && echo "$tag" >>"$work/groups"
    done
  done ) &
pids+=($!)

echo "== produce: A = no barrier group, B = a group cut every 1 s (same broker :$port)"
"$bench" -b "$brokers" --compare "$brokers" --rounds "$rounds" \
  -w bench/workloads/3-topics-12-partitions-1kb-100mbs.yaml \
  --duration-secs "$secs" --warmup-secs 5 --acks all -o "$out/produce" --quiet | tee "$out/produce.txt"

echo "== injection latency of every cut of the B rounds (completed - triggered, ms)"
while read -r tag; do
  "$bin" barrier list "cut-$tag" --json --brokers "$brokers" >"$work/cuts-$tag.json"
done <"$work/groups"
python3 - "$work"/cuts-*.json <<'PY' | tee "$out/cuts.txt"
import json, sys
# Only the cuts of the whole group (3 topics × 12 partitions) count: once a round ends its
# topics are deleted, and the group's later cuts have fewer (or no) partitions.
lat, partial, fewer = [], 0, 0
for path in sys.argv[1:]:
    for c in json.load(open(path)):
        if sum(len(t["partitions"]) for t in c["offsets"]) + len(c["missing"]) != 36:
            fewer += 1
            continue
        lat.append(c["completed_at_ms"] - c["triggered_at_ms"])
        partial += c["status"] != "complete"
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"cuts of 36 partitions={len(lat)} partial={partial} (cuts after the rounds ended: {fewer}) "
      f"injection latency p50_ms={q(0.50)} p90_ms={q(0.90)} p99_ms={q(0.99)} max_ms={lat[-1]}")
PY
