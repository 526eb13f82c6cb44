#!/usr/bin/env bash
# Issue #12's benchmark: KIP-848 rebalance time vs the classic protocol with the
# cooperative-sticky assignor, same Java client (kafka-clients 4.3), same broker, alternating
# rounds. A round: one member owns every partition of a 6-partition topic; a second joins at a
# random moment of the first one's 3 s heartbeat cycle (the same seeded moments for both
# protocols); the time from its subscribe until every partition is owned again, split between
# the two.
# Both protocols heartbeat every 3 s (the classic client's default heartbeat.interval.ms; the
# broker's group-consumer-heartbeat-interval-ms is set to match).
#
# usage: scripts/rebalance-bench.sh RINGLOG [ROUNDS] [PAIRS]
# Needs the Java client jars under target/test-connect/libs (any `cargo nextest` run of the
# Java tests prepares them, e.g. `cargo nextest run -p ringlog-ops --test consumer_protocol`).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
bin=$1 rounds=${2:-5} pairs=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
libs=$root/target/test-connect/libs
[ -d "$libs" ] || { echo "no Java client jars in $libs: run the Java tests once (see usage)" >&2; exit 1; }
cp=$(ls "$libs"/*.jar | tr '\n' ':')
bench_init rebalance
port=$((19900 + RANDOM % 90))
javac -d "$work/classes" -cp "$cp" "$root/ops/tests/clients/Kip848Check.java" "$root/ops/tests/clients/Check.java"
"$bin" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --cores 2 \
  --group-consumer-heartbeat-interval-ms 3000 >"$work/serve.log" 2>&1 &
pid=$!
pids+=("$pid")
until grep -q "ringlog ready" "$work/serve.log"; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
"$bin" topic create rebalance --partitions 6 --brokers "127.0.0.1:$port" >/dev/null
for i in $(seq "$pairs"); do
  for proto in classic consumer; do
    java -cp "$cp:$work/classes" Kip848Check rebalance "127.0.0.1:$port" rebalance "$proto" "$rounds" \
      2>/dev/null | grep -E "^(ROUND|OK)"
  done
done
