#!/usr/bin/env bash
# Issue #17's benchmark, on one machine (the same CPUs for both sides: the figure is the cost
# of the cluster path, not scaling):
#   1. produce throughput (the OMB max-rate workload, 6 partitions) of three `ringlog serve`
#      nodes against one node, `ringlog-bench --compare` in alternating rounds;
#   2. metastore writes/s (CreateTopics, DeleteTopics one at a time) through the metastore
#      leader (node 1, which initialises the cluster) and through a follower (node 2).
#
# usage: scripts/cluster-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS] [ADMIN_COUNT]
# CASES: any of "produce admin" (default both). Needs python3 (the admin part speaks the
# protocol itself). Reports in $OUT (default /tmp/ringlog-cluster-bench).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
bin=$1 bench=$2 secs=${3:-20} rounds=${4:-3} admin_count=${5:-200}
cases=${CASES:-produce admin}
python=${PYTHON:-python3}
bench_init cluster
bench_out cluster
port() { echo $((20000 + RANDOM % 20000)); }
wait_ready() { # PORT
  bench_wait_ready "$bin" "127.0.0.1:$1" 300 || { echo "broker on $1 did not start; see $work/*.log" >&2; exit 1; }
}

single=$(port)
"$bin" serve --data-dir "$work/single" --listen "127.0.0.1:$single" --cores 2 >"$work/single.log" 2>&1 &
pids+=($!)
kafka=() peers=""
for i in 1 2 3; do kafka+=("$(port)"); peers+="${peers:+,}$i=127.0.0.1:$(port)"; done
for i in 1 2 3; do
  "$bin" serve --data-dir "$work/n$i" --listen "127.0.0.1:${kafka[$((i - 1))]}" --cores 2 \
    --node-id "$i" --peers "$peers" >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
wait_ready "$single"
for p in "${kafka[@]}"; do wait_ready "$p"; done
cluster=$(printf '127.0.0.1:%s,' "${kafka[@]}")
cluster=${cluster%,}

if [[ $cases == *produce* ]]; then
echo "== produce: A = one node (--cores 2), B = three nodes (--cores 2 each), same machine"
"$bench" -b "127.0.0.1:$single" --compare "$cluster" --rounds "$rounds" \
  -w bench/workloads/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml \
  --duration-secs "$secs" --warmup-secs 5 --acks all -o "$out/produce" --quiet | tee "$out/produce.txt"
fi

if [[ $cases == *admin* ]]; then
echo "== metastore writes through the leader (node 1) and a follower (node 2), alternating"
# The controller Metadata names is the metastore leader's node.
"$bin" cluster info --brokers "127.0.0.1:${kafka[1]}" | grep -i controller
for r in $(seq "$rounds"); do
  for n in 1 2; do
    "$python" scripts/cluster_admin_bench.py "127.0.0.1:${kafka[$((n - 1))]}" "$admin_count" "r$r-n$n" \
      | sed "s/^/node $n: /" | tee -a "$out/admin.txt"
  done
done
fi
