#!/usr/bin/env bash
# Produce benchmark of `ringlog serve` with --cores 1 and --cores 2 (acks=all, 1 KiB messages),
# and in the same run the engine benchmark's baseline (plain O_DIRECT + fdatasync) for the
# ratio. Usage: scripts/produce-bench.sh [MESSAGES]
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES=${1:-200000}
VENV=target/bench-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q confluent-kafka
fi
cargo build --release -p ringlog-ops
for cores in 1 2; do
  dir=$(mktemp -d)
  port=$((19000 + RANDOM % 1000))
  ./target/release/ringlog serve --data-dir "$dir" --listen 127.0.0.1:$port --cores $cores 2>"$dir.log" &
  pid=$!
  for _ in $(seq 100); do grep -q "ringlog ready" "$dir.log" && break; sleep 0.1; done
  echo -n "cores=$cores "
  "$VENV/bin/python" scripts/produce_bench.py --bootstrap 127.0.0.1:$port --messages "$MESSAGES"
  kill -TERM $pid; wait $pid || true
  rm -rf "$dir" "$dir.log"
done
cargo bench -p ringlog-engine --bench append -- --mib 16 --rounds 3 2>/dev/null | grep RESULT
