#!/usr/bin/env bash
# Issue #18's benchmark: acks=all produce throughput and publish latency with replication
# factor 3 (min.insync.replicas at its default 1: acks=all still waits for every in-sync
# replica) against replication factor 1, on the same three-node loopback cluster in one run
# (`ringlog-bench --compare` with the cluster as both A and B, alternating rounds; A = RF 1,
# B = RF 3). Every acknowledged record is fdatasync'd on the leader (RF 1) or on every
# in-sync replica (RF 3).
#
# usage: scripts/replication-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS] [WORKLOAD]
# Reports in $OUT (default /tmp/ringlog-replication-bench); CORES per node (default 1).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
bin=$1 bench=$2 secs=${3:-20} rounds=${4:-3}
workload=${5:-bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml}
cores=${CORES:-1}
bench_init replication
bench_out replication
port() { echo $((20000 + RANDOM % 20000)); }
wait_ready() { # PORT
  bench_wait_ready "$bin" "127.0.0.1:$1" 300 || { echo "broker on $1 did not start; see $work/*.log" >&2; exit 1; }
}

kafka=() peers=""
for i in 1 2 3; do kafka+=("$(port)"); peers+="${peers:+,}$i=127.0.0.1:$(port)"; done
for i in 1 2 3; do
  "$bin" serve --data-dir "$work/n$i" --listen "127.0.0.1:${kafka[$((i - 1))]}" --cores "$cores" \
    --node-id "$i" --peers "$peers" >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
for p in "${kafka[@]}"; do wait_ready "$p"; done
cluster=$(printf '127.0.0.1:%s,' "${kafka[@]}")
cluster=${cluster%,}

echo "== acks=all: A = replication factor 1, B = replication factor 3, same three-node cluster"
"$bench" -b "$cluster" --compare "$cluster" --rounds "$rounds" \
  --replication-factor 1 --compare-replication-factor 3 \
  -w "$workload" --duration-secs "$secs" --warmup-secs 5 --acks all \
  -o "$out/produce" --quiet | tee "$out/produce.txt"
