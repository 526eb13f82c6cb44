#!/usr/bin/env bash
# Issue #14's benchmark on one `ringlog serve` build, client settings alternating in one run:
#   produce  max-rate OMB workload (6 partitions, 2 producers + 2 consumers, 1 KiB):
#            idempotent producers vs transactional ones (TXN_RECORDS per transaction, 100)
#   consume  20,000 msg/s (6 partitions, 1 producer + 1 consumer), transactional producer:
#            read_uncommitted vs read_committed consumer, end-to-end latency
#
# usage: scripts/txn-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
#   CASES="produce consume" (default both), TXN_RECORDS (default 100)
# Reports land in $OUT (default /tmp/ringlog-txn-bench); each run prints its summary line.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
bin=$1 bench=$2 secs=${3:-20} rounds=${4:-3}
txn=${TXN_RECORDS:-100}
bench_init txn
bench_out txn
port=$((19100 + RANDOM % 800))
"$bin" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --cores 2 >"$work/broker.log" 2>&1 &
pids+=($!)
bench_wait_ready "$bin" "127.0.0.1:$port" || true

run() { # NAME WORKLOAD ARGS...
  local name=$1 workload=$2
  shift 2
  "$bench" -b "127.0.0.1:$port" -w "$workload" --duration-secs "$secs" --warmup-secs 5 \
    --acks all --idempotence -o "$out/$name" --quiet "$@" | grep -E '^A \(' | sed "s/^A/$name/" | tee -a "$out/summary.txt"
}

: >"$out/summary.txt"
cases=${CASES:-"produce consume"}
for r in $(seq "$rounds"); do
  if [[ " $cases " == *" produce "* ]]; then
    run "r$r-produce-idempotent" bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml
    run "r$r-produce-txn$txn" bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml \
      --transaction-records "$txn"
  fi
  if [[ " $cases " == *" consume "* ]]; then
    # librdkafka's default isolation.level is read_committed: both are named.
    run "r$r-consume-read-uncommitted" bench/workloads/1-topic-6-partitions-1kb-1p-1c-20k-rate.yaml \
      --transaction-records "$txn" --consumer-config isolation.level=read_uncommitted
    run "r$r-consume-read-committed" bench/workloads/1-topic-6-partitions-1kb-1p-1c-20k-rate.yaml \
      --transaction-records "$txn" --consumer-config isolation.level=read_committed
  fi
done
