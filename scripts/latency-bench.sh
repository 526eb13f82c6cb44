#!/usr/bin/env bash
# Issue #21's benchmark: two `ringlog serve` builds side by side (OLD, NEW), `ringlog-bench
# --compare` alternating rounds, and the disk's own fsync probe in the same run.
#
#   low   1,000 msg/s, 1 partition, linger 0, acks=all   (publish p50/p99 vs the fsync probe)
#   mid   20,000 msg/s, 6 partitions, 1 producer + 1 consumer (publish and end-to-end p99)
#   max   the OMB max-rate workload (throughput, p99)
#   core  NEW with --core-direct on vs off, --cores 2 (max-rate and low-rate)
#   spin  NEW with spin-before-park-us 0 vs SPIN_US (default 200) (low-rate and mid-rate)
#
# usage: scripts/latency-bench.sh OLD_RINGLOG NEW_RINGLOG RINGLOG_BENCH [SECS] [ROUNDS] [CASES]
#   CASES: any of "low mid max core spin" (default: low mid max core). NEW_ARGS / OLD_ARGS: extra serve flags.
# Reports land in $OUT (default /tmp/ringlog-latency-bench); each case prints its summary.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
old=$1 new=$2 bench=$3 secs=${4:-20} rounds=${5:-3} cases=${6:-"low mid max core"}
bench_init latency
bench_out latency

start_broker() { # BIN PORT NAME ARGS...
  local bin=$1 port=$2 name=$3
  shift 3
  rm -rf "${work:?}/$name"
  mkdir -p "$work/$name"
  "$bin" serve --data-dir "$work/$name" --listen "127.0.0.1:$port" --cores 2 "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  bench_wait_ready "$bin" "127.0.0.1:$port" || { echo "broker $name did not start; see $work/$name.log" >&2; exit 1; }
}

# CASE A_BIN A_ARGS B_BIN B_ARGS WORKLOAD BENCH_ARGS...
compare() {
  local name=$1 a_bin=$2 a_args=$3 b_bin=$4 b_args=$5 workload=$6
  shift 6
  local pa=$((19100 + RANDOM % 400)) pb=$((19600 + RANDOM % 400))
  # shellcheck disable=SC2086
  start_broker "$a_bin" "$pa" "$name-a" $a_args
  # shellcheck disable=SC2086
  start_broker "$b_bin" "$pb" "$name-b" $b_args
  echo "== $name: A = $a_bin $a_args, B = $b_bin $b_args"
  "$bench" -b "127.0.0.1:$pa" --compare "127.0.0.1:$pb" --rounds "$rounds" -w "$workload" \
    --duration-secs "$secs" --warmup-secs 5 --acks all -o "$out/$name" --quiet \
    --fsync-probe "$work" "$@" | tee "$out/$name.txt"
  bench_stop
}

for c in $cases; do
  case $c in
    low) compare low "$old" "${OLD_ARGS:-}" "$new" "${NEW_ARGS:-}" \
      bench/workloads/1-topic-1-partition-1kb-1p-1c-1k-rate.yaml --linger-ms 0 ;;
    mid) compare mid "$old" "${OLD_ARGS:-}" "$new" "${NEW_ARGS:-}" \
      bench/workloads/1-topic-6-partitions-1kb-1p-1c-20k-rate.yaml ;;
    max) compare max "$old" "${OLD_ARGS:-}" "$new" "${NEW_ARGS:-}" \
      bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml ;;
    core-low)
      compare core-low "$new" "--core-direct off" "$new" "--core-direct on" \
        bench/workloads/1-topic-1-partition-1kb-1p-1c-1k-rate.yaml --linger-ms 0 ;;
    core)
      compare core-max "$new" "--core-direct off" "$new" "--core-direct on" \
        bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml
      compare core-low "$new" "--core-direct off" "$new" "--core-direct on" \
        bench/workloads/1-topic-1-partition-1kb-1p-1c-1k-rate.yaml --linger-ms 0 ;;
    spin)
      printf 'spin-before-park-us = %s\n' "${SPIN_US:-200}" >"$work/spin.toml"
      compare spin-low "$new" "" "$new" "--config $work/spin.toml" \
        bench/workloads/1-topic-1-partition-1kb-1p-1c-1k-rate.yaml --linger-ms 0
      compare spin-mid "$new" "" "$new" "--config $work/spin.toml" \
        bench/workloads/1-topic-6-partitions-1kb-1p-1c-20k-rate.yaml ;;
    *) echo "unknown case $c (expected low, mid, max, core, spin)" >&2; exit 2 ;;
  esac
done
