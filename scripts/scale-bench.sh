#!/usr/bin/env bash
# Issue #13's benchmark: one `ringlog serve --cores 2` with 100,000 partitions (100 topics x
# 1,000) under an fd limit of 20,000: RSS and fds after creation, produce throughput over a
# 10,000-partition topic vs a 100-partition topic (ringlog-bench, alternating rounds, same
# broker), then time to ready after SIGKILL (and until the background pass has opened every
# partition), clean stop time, and the same two after the clean stop.
#
# usage: scripts/scale-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
# Reports land in $OUT (default /tmp/ringlog-scale-bench).
set -euo pipefail
bin=$1 bench=$2 secs=${3:-20} rounds=${4:-2}
out=${OUT:-/tmp/ringlog-scale-bench}
work=$(mktemp -d "${TMPDIR:-/tmp}/ringlog-scale-XXXXXX")
data=$work/data
port=$((19100 + RANDOM % 800))
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$data"
ulimit -n 20000

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
start() { # LOG
  "$bin" serve --data-dir "$data" --listen "127.0.0.1:$port" --cores 2 >"$1" 2>&1 &
  pid=$!
  until grep -q "ringlog ready" "$1"; do
    kill -0 "$pid" 2>/dev/null || { echo "broker died; see $1" >&2; exit 1; }
    sleep 0.1
  done
}
all_open() { # LOG T0: waits until both cores' background open passes are done
  until [ "$(grep -c "background open pass done" "$1")" -ge 2 ]; do
    kill -0 "$pid" 2>/dev/null || { echo "broker died; see $1" >&2; exit 1; }
    sleep 0.1
  done
  echo "every partition open $(since "$2") s after the start"
}
usage() {
  echo "rss_mib=$(($(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024)) fds=$(ls "/proc/$pid/fd" | wc -l)"
}

start "$work/serve1.log"
t0=$(now)
for t in $(seq 0 99); do
  "$bin" topic create "k$t" --partitions 1000 --config segment.bytes=1048576 \
    --brokers "127.0.0.1:$port" >/dev/null
done
echo "created 100,000 partitions in $(since "$t0") s; $(usage)" | tee "$out/scale.txt"

for r in $(seq "$rounds"); do
  for n in 100 10000; do
    "$bench" -b "127.0.0.1:$port" -w "bench/workloads/1-topic-$n-partitions-1kb-2p-2c-max-rate.yaml" \
      --duration-secs "$secs" --warmup-secs 5 --acks all -o "$out/p$n-r$r" --quiet \
      | grep -E "^A " | sed "s/^A /$n partitions, round $r: /" | tee -a "$out/scale.txt"
  done
done
echo "after the benchmark: $(usage)" | tee -a "$out/scale.txt"

kill -9 "$pid"; wait "$pid" 2>/dev/null || true
t0=$(now); start "$work/serve2.log"
echo "ready after SIGKILL in $(since "$t0") s; $(usage)" | tee -a "$out/scale.txt"
all_open "$work/serve2.log" "$t0" | tee -a "$out/scale.txt"
t0=$(now); kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
echo "clean stop in $(since "$t0") s" | tee -a "$out/scale.txt"
t0=$(now); start "$work/serve3.log"
echo "ready after the clean stop in $(since "$t0") s; $(usage)" | tee -a "$out/scale.txt"
all_open "$work/serve3.log" "$t0" | tee -a "$out/scale.txt"
echo "then: $(usage)" | tee -a "$out/scale.txt"
