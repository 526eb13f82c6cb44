#!/usr/bin/env bash
# Issue #11's cleaner benchmark, on one `ringlog` binary with one core. (The p99 rounds run
# first: the throughput phase writes gigabytes, which leaves the disk busy for a while.)
#
# 1. Cleaner throughput: ringlog-bench fills a topic (64 MiB segments, 10,000 keys, 1 KiB
#    values) for FILL_SECS, the topic is switched to cleanup.policy=compact, and the pass's own
#    log line gives dirty bytes and wall time: MiB/s of dirty log cleaned.
# 2. Produce p99 next to the cleaner: ROUNDS rounds, each with two fresh brokers one after the
#    other (the order alternates between rounds), both carrying the same paced keyed writer
#    (NOISE_RATE 1 KiB records/s over 10,000 keys into a 1 MiB-segment topic); in the "clean"
#    broker that topic is compacted (the cleaner runs all along), in the "idle" one it is
#    not. ringlog-bench measures the 20,000 msg/s 1 KiB workload on the same core. The figure:
#    clean/idle publish p99 (median over rounds).
#
# usage: scripts/cleaner-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
# needs: a Python with confluent-kafka (PYTHON, default target/test-venv/bin/python, which the
# tests create).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
ringlog=$1 bench=$2 secs=${3:-20} rounds=${4:-3}
python=${PYTHON:-target/test-venv/bin/python}
noise_rate=${NOISE_RATE:-5000}
fill_secs=${FILL_SECS:-10}
bench_init cleaner

start_broker() { # NAME PORT
  mkdir -p "$work/$1"
  printf 'log-cleaner-backoff-ms = 1000\nlog-segment-bytes = 67108864\n' >"$work/$1.toml"
  "$ringlog" serve --data-dir "$work/$1/data" --listen "127.0.0.1:$2" --cores 1 \
    --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  pids+=($!)
  bench_wait_ready "$ringlog" "127.0.0.1:$2" || { echo "broker $1 did not start; see $work/$1.log" >&2; exit 1; }
}

echo "== produce p99 next to the cleaner ($rounds rounds, $secs s each)"
run_variant() { # NAME POLICY ROUND
  local name=$1-$3 port=$((19100 + RANDOM % 800))
  start_broker "$name" "$port"
  local cfg="--config segment.bytes=1048576"
  [ "$2" = compact ] && cfg="$cfg --config cleanup.policy=compact --config min.cleanable.dirty.ratio=0.5"
  # shellcheck disable=SC2086
  "$ringlog" topic create --brokers "127.0.0.1:$port" noisy --partitions 1 $cfg >/dev/null
  "$python" scripts/noise_writer.py "127.0.0.1:$port" noisy "$noise_rate" 10000 &
  pids+=($!)
  sleep 5
  "$bench" -b "127.0.0.1:$port" -w bench/workloads/1-topic-6-partitions-1kb-2p-2c-20k-rate.yaml \
    --duration-secs "$secs" --warmup-secs 5 --acks all -o "$work/$name" --quiet | sed -n 1p |
    sed "s/^A ([^)]*)/$name/"
  passes=$(grep -c "cleaner pass.*noisy" "$work/$name.log" || true)
  echo "   $name: $passes cleaner passes over the noisy topic"
  bench_stop
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="idle clean"; else order="clean idle"; fi
  for v in $order; do
    if [ "$v" = idle ]; then run_variant idle delete "$r"; else run_variant clean compact "$r"; fi
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def p99(name):
    r = json.load(open(f"{work}/{name}/result.json"))
    return r["runs"][0]["summary"]["publish_latency"]["p99_ms"]
ratios = []
for i in range(1, rounds + 1):
    idle, clean = p99(f"idle-{i}"), p99(f"clean-{i}")
    ratios.append(clean / idle)
    print(f"round {i}: publish p99 idle {idle:.3f} ms, cleaning {clean:.3f} ms, ratio {clean / idle:.3f}")
print(f"median clean/idle publish p99: {statistics.median(ratios):.3f}")
PY
echo "== cleaner throughput"
port=$((19100 + RANDOM % 800))
start_broker fill "$port"
"$bench" -b "127.0.0.1:$port" --topics 1 --partitions 1 --message-size 1024 \
  --key-distributor KEY_ROUND_ROBIN --producers-per-topic 1 --subscriptions-per-topic 0 \
  --rate 0 --duration-secs "$fill_secs" --warmup-secs 0 --keep-topics --topic-prefix dirty \
  --quiet -o "$work/fill" | sed -n 1p
topic=$("$ringlog" topic list --brokers "127.0.0.1:$port" | awk '/^dirty/ {print $1}')
"$ringlog" topic alter-config --brokers "127.0.0.1:$port" --set cleanup.policy=compact "$topic" >/dev/null
for _ in $(seq 600); do
  grep -q "cleaner pass.*$topic" "$work/fill.log" && break
  sleep 0.1
done
line=$(grep "cleaner pass.*$topic" "$work/fill.log" | head -1)
echo "$line" | sed 's/.*cleaner pass//'
dirty=$(echo "$line" | sed -n 's/.* dirty=\([0-9]*\).*/\1/p')
ms=$(echo "$line" | sed -n 's/.* elapsed_ms=\([0-9]*\).*/\1/p')
python3 -c "print(f'cleaned {$dirty/2**20:.0f} MiB of dirty log in {$ms} ms: {$dirty/2**20/max($ms,1)*1000:.0f} MiB/s')"
bench_stop

