#!/usr/bin/env bash
# Issue #21: what this machine's latency floor is, beside the broker's own share. One run:
#   1. the disk's fdatasync (ringlog-bench --fsync-probe), a TCP echo, and raw Produce round
#      trips to the owner core of a broker on the disk and of one on tmpfs (/dev/shm: O_DIRECT
#      completes in memory, fdatasync costs nothing), ROUNDS times;
#   2. ringlog-bench --compare, disk broker (A) against tmpfs broker (B): the 1,000 msg/s
#      low-rate workload (linger 0), then the 20,000 msg/s workload.
# A tmpfs broker is a broker whose storage is free: where it misses a latency target, no
# storage path can meet it on this machine.
#
# usage: scripts/latency-floor.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]   (needs python3, kcat)
set -euo pipefail
bin=$1 bench=$2 secs=${3:-15} rounds=${4:-3}
out=${OUT:-/tmp/ringlog-latency-floor}
probe=scripts/latency_floor_probe.py
disk=$(mktemp -d "${TMPDIR:-/tmp}/ringlog-floor-disk-XXXXXX")
shm=$(mktemp -d /dev/shm/ringlog-floor-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$disk" "$shm"
}
trap cleanup EXIT
mkdir -p "$out"
pa=$((21000 + RANDOM % 2000)) pb=$((23500 + RANDOM % 2000))
"$bin" serve --data-dir "$disk/data" --listen "127.0.0.1:$pa" --cores 2 --core-direct on >"$out/disk.log" 2>&1 &
pids+=($!)
"$bin" serve --data-dir "$shm/data" --listen "127.0.0.1:$pb" --cores 2 --core-direct on >"$out/tmpfs.log" 2>&1 &
pids+=($!)
for p in $pa $pb; do
  for _ in $(seq 100); do "$bin" topic list --brokers "127.0.0.1:$p" >/dev/null 2>&1 && break; sleep 0.1; done
  "$bin" topic create floor --partitions 1 --brokers "127.0.0.1:$p" >/dev/null
done
# The owner core's own port (core-direct): no cross-core hop.
owner_port() {
  local leader
  leader=$(kcat -L -b "127.0.0.1:$1" -t floor | awk '/partition 0,/ {gsub(",", "", $4); print $4}')
  kcat -L -b "127.0.0.1:$1" | awk -v id="$leader" '$1 == "broker" && $2 == id {split($4, a, ":"); print a[2]}'
}
oa=$(owner_port $pa) ob=$(owner_port $pb)
for r in $(seq "$rounds"); do
  echo "== round $r"
  "$bench" --fsync-probe "$disk" --fsync-count 2000 | grep -A3 '"fdatasync"' | tr -d '\n '; echo
  python3 "$probe" echo - 1000 10
  echo -n "disk:  "; python3 "$probe" produce "127.0.0.1:$oa" floor 1000 10
  echo -n "tmpfs: "; python3 "$probe" produce "127.0.0.1:$ob" floor 1000 10
done | tee "$out/floors.txt"
for w in 1-topic-1-partition-1kb-1p-1c-1k-rate 1-topic-6-partitions-1kb-1p-1c-20k-rate; do
  echo "== $w: A = disk, B = tmpfs"
  extra=()
  [[ $w == *1k-rate ]] && extra=(--linger-ms 0)
  "$bench" -b "127.0.0.1:$pa" --compare "127.0.0.1:$pb" --rounds "$rounds" -w "bench/workloads/$w.yaml" \
    --duration-secs "$secs" --warmup-secs 3 --acks all -o "$out/$w" --quiet --fsync-probe "$disk" \
    "${extra[@]}" | tee "$out/$w.txt"
done
