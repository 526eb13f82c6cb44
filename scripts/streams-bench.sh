#!/usr/bin/env bash
# Records/s through the word-count group runner (streams/examples/word_count.rs, issue #16)
# aligned on a barrier group cutting every second, against the same runner without
# barriers, in the same run (rounds interleaved: this machine is shared and noisy).
#
# The inputs (3 topics x 4 partitions) are produced in chunks while the group cuts every
# second, so the cuts fall inside the data; each round reads everything from the start in a consumer
# group of its own, and reports records / (last record run - first record run).
#
# usage: scripts/streams-bench.sh [RECORDS_PER_TOPIC] [ROUNDS]
#   RINGLOG (default target/release/ringlog), WORD_COUNT (target/release/examples/word_count)
# build: cargo build --release -p ringlog-ops -p ringlog-streams --example word_count
set -euo pipefail
cd "$(dirname "$0")/.."
RINGLOG=${RINGLOG:-target/release/ringlog}
WORD_COUNT=${WORD_COUNT:-target/release/examples/word_count}
RECORDS_PER_TOPIC=${1:-300000}
ROUNDS=${2:-3}
for b in "$RINGLOG" "$WORD_COUNT"; do
  [ -x "$b" ] || { echo "streams-bench: $b not built; run: cargo build --release -p ringlog-ops -p ringlog-streams --example word_count" >&2; exit 2; }
done

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
brokers=127.0.0.1:$port
"$RINGLOG" serve --data-dir "$work/data" --listen "$brokers" --cores 2 >"$work/broker.log" 2>&1 &
broker_pid=$!
trap 'kill $broker_pid 2>/dev/null; wait $broker_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  "$RINGLOG" cluster --brokers "$brokers" >/dev/null 2>&1 && break
  sleep 0.2
done

inputs=words-a,words-b,words-c
for t in words-a words-b words-c counts; do
  "$RINGLOG" topic create "$t" --partitions 4 --brokers "$brokers" >/dev/null
done
"$RINGLOG" barrier define bench --topics "$inputs" --interval 1s --retained-cuts 1000 --brokers "$brokers" >/dev/null

echo "# producing $RECORDS_PER_TOPIC records into each of $inputs (cuts every 1 s meanwhile)" >&2
python3 -c "
import random
r = random.Random(7)
for _ in range($RECORDS_PER_TOPIC):
    print(' '.join('w%d' % r.randrange(1000) for _ in range(4)))" >"$work/words.txt"
# In chunks 1.1 s apart, each about what the runner reads in a second (CHUNK_RECORDS per
# topic), so that the cuts fall about every second of the runner's reading.
CHUNK_RECORDS=${CHUNK_RECORDS:-75000}
split -l "$CHUNK_RECORDS" "$work/words.txt" "$work/chunk-"
started=$(date +%s.%N)
for chunk in "$work"/chunk-*; do
  producers=()
  for t in words-a words-b words-c; do
    "$RINGLOG" produce "$t" --brokers "$brokers" <"$chunk" >/dev/null &
    producers+=($!)
  done
  wait "${producers[@]}"
  sleep 1.1
done
echo "# produced in $(python3 -c "print(round($(date +%s.%N) - $started, 1))") s" >&2

# One runner over everything from the start: "records rate barriers".
run() {
  local mode=$1 round=$2 out
  local args=(--brokers "$brokers" --inputs "$inputs" --output counts --group "bench-$mode-$round"
    --state-dir "$work/state-$mode-$round" --exit-when-idle-ms 3000)
  if [ "$mode" = barriers ]; then args+=(--barrier-group bench); else args+=(--no-barriers); fi
  out=$("$WORD_COUNT" "${args[@]}")
  echo "$out" | python3 -c "
import sys
lines = sys.stdin.read().splitlines()
done = [l.split() for l in lines if l.startswith('done ')][0]
records, secs = int(done[1]), float(done[4])
print(records, round(records / secs), sum(1 for l in lines if l.startswith('barrier ')))"
}

printf '%-6s %-9s %10s %12s %9s\n' round mode records records/s barriers
with=() without=()
for round in $(seq "$ROUNDS"); do
  for mode in barriers none; do
    read -r records rate barriers < <(run "$mode" "$round")
    printf '%-6s %-9s %10s %12s %9s\n' "$round" "$mode" "$records" "$rate" "$barriers"
    if [ "$mode" = barriers ]; then with+=("$rate"); else without+=("$rate"); fi
  done
done
python3 -c "
import statistics
w = [int(x) for x in '${with[*]}'.split()]
n = [int(x) for x in '${without[*]}'.split()]
print('median records/s: with barriers every 1 s %d, without %d, ratio %.3f' % (statistics.median(w), statistics.median(n), statistics.median(w) / statistics.median(n)))"
