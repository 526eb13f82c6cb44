#!/usr/bin/env bash
# Fan-out benchmark (issue #6): child lag vs parent produce latency and delay lateness, then the
# broker's idle CPU with 1 and with 1,000,000 pending delayed records. Usage: scripts/fanout-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=target/bench-venv
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV"; "$VENV/bin/pip" install -q confluent-kafka; }
cargo build --release -p ringlog-ops
for mode in lag idle-1 idle-1m; do
  dir=$(mktemp -d); port=$((20000 + RANDOM % 1000))
  ./target/release/ringlog serve --data-dir "$dir" --listen 127.0.0.1:$port --cores 2 2>"$dir.log" &
  pid=$!
  for _ in $(seq 100); do grep -q "ringlog ready" "$dir.log" && break; sleep 0.1; done
  echo -n "$mode "; "$VENV/bin/python" scripts/fanout_bench.py 127.0.0.1:$port $pid $mode
  kill -TERM $pid; wait $pid || true; rm -rf "$dir" "$dir.log"
done
