#!/usr/bin/env bash
# Issue #20's noisy-neighbour benchmark. Two one-core brokers (OLD and NEW `ringlog` binaries)
# each carry a roll-heavy topic (`segment.bytes` = 1 MiB) with a fan-out child, fed by a paced
# producer (NOISE_RATE 1 KiB records/s, acks=all); on the same core `ringlog-bench --compare`
# measures another topic (the 20,000 msg/s 1 KiB workload). The figure: NEW/OLD publish p99
# while both carry the same noise (segment rolls, cursor offset-file writes, fan-out appends).
#
# usage: scripts/neighbor-bench.sh OLD_RINGLOG NEW_RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
# needs: a Python with confluent-kafka (PYTHON, default target/test-venv/bin/python, which the
# tests create).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
old=$1 new=$2 bench=$3 secs=${4:-20} rounds=${5:-3}
python=${PYTHON:-target/test-venv/bin/python}
noise_rate=${NOISE_RATE:-3000}
bench_init neighbor

start_broker() { # BIN PORT NAME
  mkdir -p "$work/$3"
  "$1" serve --data-dir "$work/$3" --listen "127.0.0.1:$2" --cores 1 >"$work/$3.log" 2>&1 &
  pids+=($!)
  bench_wait_ready "$1" "127.0.0.1:$2" || { echo "broker $3 did not start; see $work/$3.log" >&2; exit 1; }
}

port_a=$((19100 + RANDOM % 400)) port_b=$((19600 + RANDOM % 400))
start_broker "$old" "$port_a" old
start_broker "$new" "$port_b" new
for port in "$port_a" "$port_b"; do
  "$new" topic create --brokers "127.0.0.1:$port" noisy --partitions 1 --config segment.bytes=1048576
  "$new" topic create --brokers "127.0.0.1:$port" noisy-fan --partitions 1 --config fanout.parent=noisy
  "$python" scripts/noise_writer.py "127.0.0.1:$port" noisy "$noise_rate" &
  pids+=($!)
done
sleep 3
"$bench" -b "127.0.0.1:$port_a" --compare "127.0.0.1:$port_b" --rounds "$rounds" \
  -w bench/workloads/1-topic-6-partitions-1kb-2p-2c-20k-rate.yaml \
  --duration-secs "$secs" --warmup-secs 5 --acks all -o "$work/report" --quiet
for name in old new; do
  segs=$(ls "$work/$name/topics/noisy/p00000" | grep -c '\.log$' || true)
  child=$(ls "$work/$name/topics/noisy-fan/p00000" | grep -c '\.log$' || true)
  echo "$name: noisy topic holds $segs segments (1 MiB each), its fan-out child $child"
done
