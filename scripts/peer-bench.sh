#!/usr/bin/env bash
# ringlog against the reference peer, Apache Kafka 4.4.0 (scripts/kafka-peer.sh), side by side in
# one run. Each comparison is one `ringlog-bench -b RINGLOG --compare KAFKA` invocation
# (runs alternate A B A B ..., A = ringlog, B = Kafka), so both brokers see the same machine
# within the same minutes and the B/A ratios are the figures that mean something; the load
# average before and after each comparison is recorded (the machine may be shared).
#
# Kafka runs in two modes, each its own set of comparisons against the same ringlog:
#   default  Kafka's defaults: a record is acknowledged once it is in the page cache (no fsync)
#   durable  log.flush.interval.messages=1: Kafka fsyncs the log after every append, before
#            acknowledging (kafka-peer.sh --durable)
# ringlog runs with its defaults throughout (it acknowledges only fdatasync'd records) but for
# group-initial-rebalance-delay-ms = 0, the value scripts/kafka-peer.sh gives Kafka. Every
# producer uses acks=all.
#
# Cases (CASES, default all but rf3mid), each against ringlog `serve --cores $CORES` (default 2)
# and one Kafka KRaft node (broker+controller) unless named otherwise:
#   low      1,000 msg/s, 1 partition, 1 producer + 1 consumer, linger 0, with the disk's
#            fsync probe (--fsync-probe) in the same invocation
#   mid      20,000 msg/s, 6 partitions, 2 producers + 2 consumers
#   max      maximum rate, 6 partitions, 2 producers + 2 consumers
#   lz4      max rate as above, lz4 batches, half-random payloads (compressible)
#   zstd     the same with zstd
#   p1000    max rate, 1,000 partitions (the 100-partition workload with --partitions 1000),
#            with a PART_WARMUP (default 45 s) warm-up: Kafka creates a partition's log after the
#            topic's leaders are already in the metadata (which is all ringlog-bench waits for),
#            at tens of logs a second on this kind of disk; each broker's partition creation span
#            is taken from its log (CASE/creation.txt)
#   perf     Kafka's own Java tools against each broker in turn: kafka-producer-perf-test
#            (PERF_RECORDS 1 KiB records, default 300,000; PERF_RECORDS_DURABLE, default 100,000,
#            against durable Kafka, whose fsync per append makes it far slower; acks=all,
#            unthrottled) then kafka-consumer-perf-test reading them back
#   backlog  a BACKLOG_GB (default 1) GiB backlog built at BACKLOG_RATE msg/s (default 30,000)
#            on 6 partitions before the 2 consumers start; the time to drain it. In the Kafka
#            modes of BACKLOG_MODES (default both: durable Kafka keeps the 30,000 msg/s)
#   p10000   max rate, the 10,000-partition workload (bench/workloads/1-topic-10000-...) with
#            P10000_PARTITIONS (default 9,999) partitions and a P10000_WARMUP (default 400 s:
#            Kafka takes one to two minutes to create the 9,999 logs here, and its producers
#            time out on the partitions it has not created yet) warm-up, in the Kafka modes of
#            P10000_MODES (default both). 9,999: Kafka 4.4's
#            KRaft controller refuses a CreateTopics of 10,000 partitions ("Unable to perform
#            excessively large batch operation": a topic record and 10,000 partition records
#            exceed its 10,000 records per operation). ringlog-bench gives CreateTopics a fixed
#            30 s; a broker that takes longer to answer fails the case. Creation spans as p1000
#   rf3      max rate, replication factor 3: three ringlog nodes (`--cores $RF3_CORES`, default
#            1, as scripts/replication-bench.sh) against a three-node Kafka cluster
#   rf3mid   20,000 msg/s with replication factor 3 on the same clusters
#
# usage: scripts/peer-bench.sh RINGLOG RINGLOG_BENCH [SECS] [ROUNDS]
#   SECS: measured seconds per run (default 10; WARMUP_SECS, default 3, before it);
#   ROUNDS: runs per broker in each comparison (default 1).
# Environment: OUT (default /tmp/ringlog-peer-bench), MODES (default "default durable"),
#   CASES, CORES, RF3_CORES, BACKLOG_GB, BACKLOG_RATE, BACKLOG_MODES, PERF_RECORDS,
#   PERF_RECORDS_DURABLE, PART_WARMUP, P10000_MODES, P10000_PARTITIONS, P10000_WARMUP,
#   RINGLOG_PEER_HEAP (Kafka's -Xmx, default 512m), KAFKA_START_TIMEOUT (s, default 180).
# Every step runs under `timeout`; a failed case is recorded (OUT/cases.tsv, CASE/failure.txt)
# and the run goes on; every process and temporary directory is removed on exit. The brokers'
# own logs are kept, gzipped, in OUT/logs. At the end scripts/peer_bench_report.py writes
# OUT/summary.md (a table per comparison, ringlog / Kafka ratios) and, when matplotlib imports
# in $PLOT_PYTHON (default python3), OUT/ratios.png. docs/performance.md has a run's results.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$(realpath "$1") bench=$(realpath "$2") secs=${3:-10} rounds=${4:-1}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
peer=$here/kafka-peer.sh
out=${OUT:-/tmp/ringlog-peer-bench}
modes=${MODES:-"default durable"}
cases=${CASES:-"low mid max lz4 zstd p1000 perf backlog p10000 rf3"}
cores=${CORES:-2}
rf3_cores=${RF3_CORES:-1}
warmup=${WARMUP_SECS:-3}
backlog_gb=${BACKLOG_GB:-1}
backlog_rate=${BACKLOG_RATE:-30000}
perf_records=${PERF_RECORDS:-300000}
perf_records_durable=${PERF_RECORDS_DURABLE:-100000}
backlog_modes=${BACKLOG_MODES:-"default durable"}
p10000_modes=${P10000_MODES:-"default durable"}
p10000_partitions=${P10000_PARTITIONS:-9999}
p10000_warmup=${P10000_WARMUP:-400}
part_warmup=${PART_WARMUP:-45}
export RINGLOG_PEER_HEAP=${RINGLOG_PEER_HEAP:-512m}
export RINGLOG_PEER_START_TIMEOUT=${KAFKA_START_TIMEOUT:-180}
export RINGLOG_PEER_STOP_TIMEOUT=30
wl=$repo/bench/workloads

# The output folder: a fresh one each run (one this script made before is replaced).
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
  [ -f "$out/.peer-bench" ] || { echo "peer-bench: $out is not empty and not ours; set OUT" >&2; exit 2; }
  rm -rf "${out:?}"
fi
mkdir -p "$out"
touch "$out/.peer-bench"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ringlog-peer-bench-XXXXXX")
t_all=$SECONDS

ringlog_pids=() kafka_dirs=()
stop_ringlog() {
  local p
  for p in "${ringlog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${ringlog_pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  wait "${ringlog_pids[@]}" 2>/dev/null || true
  ringlog_pids=()
}
stop_kafka() {
  local d
  for d in "${kafka_dirs[@]}"; do timeout -k 5 60 "$peer" stop "$d" >/dev/null 2>&1 || true; done
  kafka_dirs=()
}
# The brokers' logs (kafka.log, ringlog.log, nN.log; not data) of DIR, gzipped into OUT/logs.
log_seq=0
keep_logs() { # DIR
  [ -d "$1" ] || return 0
  local dest f rel
  log_seq=$((log_seq + 1))
  dest=$out/logs/$(basename "$1")-$log_seq
  while IFS= read -r f; do
    rel=${f#"$1"/}
    mkdir -p "$dest/$(dirname "$rel")"
    gzip -c "$f" >"$dest/$rel.gz" || true
  done < <(find "$1" -maxdepth 2 -type f -name '*.log')
}
summarized=0
# The summary (also when a broker failed to start and the run stops early).
summarize() {
  [ "$summarized" = 0 ] && [ -f "$out/cases.tsv" ] || return 0
  summarized=1
  echo "load at end: $(load)" >>"$out/machine.txt"
  echo "total: $((SECONDS - t_all)) s" >>"$out/machine.txt"
  python3 "$here/peer_bench_report.py" "$out" || echo "peer-bench: the summary failed" >&2
  if "${PLOT_PYTHON:-python3}" -c 'import matplotlib' 2>/dev/null; then
    "${PLOT_PYTHON:-python3}" "$here/peer_bench_report.py" --plot "$out/ratios.png" "$out" >/dev/null ||
      echo "peer-bench: the plot failed" >&2
  else
    echo "peer-bench: no matplotlib in ${PLOT_PYTHON:-python3}; no plot (set PLOT_PYTHON)"
  fi
}
cleanup() {
  trap - EXIT INT TERM
  stop_ringlog
  stop_kafka
  local d
  for d in "$work"/*/; do keep_logs "${d%/}"; done
  summarize || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

load() { uptime | sed 's/.*load average: //'; }
is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Ports: a block of 30 from a random base, none of them in use now.
for _ in $(seq 50); do
  base=$((20000 + (RANDOM % 600) * 50)) busy=0
  for p in $(seq "$base" $((base + 29))); do is_open "$p" && { busy=1; break; }; done
  [ "$busy" = 0 ] && break
done
r_port=$base k_port=$((base + 2))                 # single nodes (Kafka's controller: +1)
rc_base=$((base + 10)) rc_meta=$((base + 13))     # ringlog cluster: clients, metastore
kc_base=$((base + 20))                            # Kafka cluster: base..base+5

# ---- machine and versions, for the report -------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "memory: $(free -h | awk '/^Mem:/ {print $2 " total, " $7 " available"}')"
  echo "disk (df -h of the data dirs' folder $work):"
  df -h "$work" | sed 's/^/  /'
  echo "kernel: $(uname -sr)"
  echo "java: $(java -version 2>&1 | head -1)"
  echo "ringlog: $("$bin" --version 2>&1 | head -1)"
  echo "ringlog-bench: $("$bench" --version 2>&1 | head -1)"
  echo "kafka: Apache Kafka 4.4.0 (scripts/kafka-peer.sh), broker heap -Xmx$RINGLOG_PEER_HEAP"
  echo "args: SECS=$secs ROUNDS=$rounds WARMUP_SECS=$warmup CORES=$cores RF3_CORES=$rf3_cores" \
    "BACKLOG_GB=$backlog_gb BACKLOG_RATE=$backlog_rate BACKLOG_MODES=\"$backlog_modes\"" \
    "PERF_RECORDS=$perf_records PERF_RECORDS_DURABLE=$perf_records_durable" \
    "PART_WARMUP=$part_warmup P10000_MODES=\"$p10000_modes\" P10000_PARTITIONS=$p10000_partitions" \
    "P10000_WARMUP=$p10000_warmup"
  echo "modes: $modes"
  echo "cases: $cases"
  echo "load at start: $(load)"
} >"$out/machine.txt"
cat "$out/machine.txt"
timeout -k 5 600 "$peer" fetch

printf 'id\tmode\tcase\ttitle\trc\tload_before\tload_after\tsecs\n' >"$out/cases.tsv"
record() { # ID MODE CASE TITLE RC LOAD_BEFORE LOAD_AFTER SECS
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$out/cases.tsv"
}

# ---- brokers -------------------------------------------------------------------------------
wait_ringlog() { # PORT LOG
  for _ in $(seq 600); do
    timeout 5 "$bin" topic list --brokers "127.0.0.1:$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "peer-bench: ringlog on $1 did not start; see $2" >&2
  tail -n 20 "$2" >&2
  return 1
}
start_ringlog_single() { # NAME
  keep_logs "$work/$1"
  rm -rf "${work:?}/$1"
  mkdir -p "$work/$1"
  "$bin" serve --data-dir "$work/$1/data" --listen "127.0.0.1:$r_port" --cores "$cores" \
    --config "$work/ringlog.toml" >"$work/$1/ringlog.log" 2>&1 &
  ringlog_pids+=($!)
  wait_ringlog "$r_port" "$work/$1/ringlog.log"
  ringlog_addr=127.0.0.1:$r_port
}
start_ringlog_cluster() { # NAME
  local i peers="" addrs=()
  keep_logs "$work/$1"
  rm -rf "${work:?}/$1"
  mkdir -p "$work/$1"
  for i in 1 2 3; do peers+="${peers:+,}$i=127.0.0.1:$((rc_meta + i - 1))"; done
  for i in 1 2 3; do
    "$bin" serve --data-dir "$work/$1/n$i" --listen "127.0.0.1:$((rc_base + i - 1))" \
      --cores "$rf3_cores" --node-id "$i" --peers "$peers" --config "$work/ringlog.toml" \
      >"$work/$1/n$i.log" 2>&1 &
    ringlog_pids+=($!)
  done
  for i in 1 2 3; do
    wait_ringlog $((rc_base + i - 1)) "$work/$1/n$i.log"
    addrs+=("127.0.0.1:$((rc_base + i - 1))")
  done
  ringlog_addr=$(IFS=,; echo "${addrs[*]}")
}
kafka_flags() { [ "$1" = durable ] && echo --durable || true; }
start_kafka_single() { # NAME MODE RINGLOG_NAME
  local d=$work/$1
  keep_logs "$d"
  rm -rf "$d"
  kafka_dirs+=("$d")
  ringlog_log=$work/$3/ringlog.log kafka_log=$d/kafka.log
  # shellcheck disable=SC2046
  timeout -k 10 $((RINGLOG_PEER_START_TIMEOUT + 120)) "$peer" start single "$d" "$k_port" $(kafka_flags "$2")
  kafka_addr=127.0.0.1:$k_port
}
start_kafka_cluster() { # NAME MODE
  local d=$work/$1
  keep_logs "$d"
  rm -rf "$d"
  kafka_dirs+=("$d")
  # shellcheck disable=SC2046
  timeout -k 10 $((RINGLOG_PEER_START_TIMEOUT + 120)) "$peer" start cluster "$d" "$kc_base" $(kafka_flags "$2")
  kafka_addr=127.0.0.1:$kc_base,127.0.0.1:$((kc_base + 1)),127.0.0.1:$((kc_base + 2))
}
# Are the brokers of this phase still up? (A case that failed may have taken one down.)
brokers_alive() {
  local p d
  for p in "${ringlog_pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
  for d in "${kafka_dirs[@]}"; do
    for f in "$d/kafka.pid" "$d"/node*/kafka.pid; do
      [ -f "$f" ] || continue
      kill -0 "$(cat "$f")" 2>/dev/null || return 1
    done
  done
}
# Why a case failed: the bench's last words and the brokers' errors.
why_failed() { # DIR RC
  {
    echo "exit status $2$([ "$2" = 124 ] || [ "$2" = 137 ] && echo ' (timed out)')"
    echo "--- ringlog-bench / tool stderr (last 15 lines)"
    tail -n 15 "$1"/*stderr*.txt 2>/dev/null || true
    local d f
    for d in "${kafka_dirs[@]}"; do
      for f in "$d/kafka.log" "$d"/node*/kafka.log; do
        [ -f "$f" ] || continue
        echo "--- ${f#"$work"/}: errors (last 10)"
        grep -E '\] (ERROR|FATAL) |OutOfMemory|Too many open files' "$f" | tail -n 10 || true
      done
    done
    for p in "${ringlog_pids[@]}"; do kill -0 "$p" 2>/dev/null || echo "ringlog pid $p exited"; done
    brokers_alive || echo "a broker of this phase is down"
  } >"$1/failure.txt" 2>&1
  sed 's/^/    /' "$1/failure.txt" | head -n 40
}

# ---- cases ---------------------------------------------------------------------------------
# A compressible variant of the max-rate workload (half of each payload random, half zeros):
# lz4 and zstd then have something to do; random payloads would not shrink.
sed -e '/^payloadFile/d' -e 's/^name: .*/name: 1 topic \/ 6 partitions \/ 1kb half-random \/ 2 producers \/ 2 consumers \/ max rate/' \
  "$wl/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml" >"$work/max-rate-compressible.yaml"
printf 'useRandomizedPayloads: true\nrandomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 1000\n' \
  >>"$work/max-rate-compressible.yaml"
cp "$work/max-rate-compressible.yaml" "$out/"
# ringlog's settings: its defaults, but the new group's first rebalance at once, as the peer's.
printf 'group-initial-rebalance-delay-ms = 0\n' >"$work/ringlog.toml"
cp "$work/ringlog.toml" "$out/"

# One ringlog-bench comparison. ID MODE CASE TITLE EXTRA_LIMIT_S BENCH_ARGS...
bench_case() {
  local id=$1 mode=$2 c=$3 title=$4 extra=$5 rc=0 t0=$SECONDS before after limit
  shift 5
  local dir=$out/$id
  mkdir -p "$dir"
  # Hard cap: per run warm-up + test + 150 s (topic set-up, consumers joining, the drain,
  # topic deletion), plus what the case adds.
  local w=${case_warmup:-$warmup}
  limit=$((rounds * 2 * (w + secs + 150 + extra) + 30))
  echo
  echo "== $id: $title"
  echo "   A = ringlog ($ringlog_addr), B = Kafka 4.4.0 $mode ($kafka_addr); load $(load)"
  before=$(load)
  echo "$bench -b $ringlog_addr --compare $kafka_addr --rounds $rounds --duration-secs $secs" \
    "--warmup-secs $w --acks all -o $dir --quiet $*" >"$dir/command.txt"
  timeout -k 15 "$limit" "$bench" -b "$ringlog_addr" --compare "$kafka_addr" --rounds "$rounds" \
    --duration-secs "$secs" --warmup-secs "$w" --acks all -o "$dir" --quiet "$@" \
    >"$dir/stdout.txt" 2>"$dir/stderr.txt" || rc=$?
  after=$(load)
  grep -E '^\[(A|B) r[0-9]+\]|^fsync probe: fdatasync' "$dir/stderr.txt" | sed 's/^/   /' || true
  grep -E '^(A|B) \(' "$dir/stdout.txt" | sed 's/^/   /' || true
  if [ "$rc" != 0 ]; then
    echo "   FAILED (rc $rc after $((SECONDS - t0)) s):"
    why_failed "$dir" "$rc"
  fi
  echo "   took $((SECONDS - t0)) s; load after $after"
  record "$id" "$mode" "$c" "$title" "$rc" "$before" "$after" $((SECONDS - t0))
}

# Kafka's own Java tools against each broker in turn. ID MODE
perf_case() {
  local id=$1 mode=$2 rc=0 t0=$SECONDS before after r who addr t f lim n=$perf_records
  local dir=$out/$id
  mkdir -p "$dir"
  # Durable Kafka acknowledges far fewer records a second: fewer records, a longer limit.
  lim=$((60 + n / 2000))
  [ "$mode" = durable ] && n=$perf_records_durable lim=$((90 + perf_records_durable / 300))
  echo
  echo "== $id: Kafka's ProducerPerformance / ConsumerPerformance ($n x 1 KiB, acks=all," \
    "6 partitions), ringlog then Kafka 4.4.0 $mode; load $(load)"
  echo "$n" >"$dir/records.txt"
  before=$(load)
  for r in $(seq "$rounds"); do
    for who in ringlog kafka; do
      [ "$who" = ringlog ] && addr=$ringlog_addr || addr=$kafka_addr
      t=peerperf-$who-r$r-$RANDOM
      f=$dir/$who-r$r
      {
        timeout -k 5 120 "$peer" tool kafka-topics --bootstrap-server "$addr" --create --topic "$t" \
          --partitions 6 --replication-factor 1 &&
          timeout -k 5 "$lim" "$peer" tool kafka-producer-perf-test --bootstrap-server "$addr" \
            --topic "$t" --num-records "$n" --record-size 1024 --throughput -1 \
            --command-property acks=all >"$f-producer.txt" &&
          timeout -k 5 "$lim" "$peer" tool kafka-consumer-perf-test --bootstrap-server "$addr" \
            --topic "$t" --num-records "$n" --timeout 30000 --group "g-$t" \
            >"$f-consumer.txt"
      } 2>"$f-stderr.txt" || { rc=$?; echo "   $who round $r failed (rc $rc)"; }
      timeout -k 5 60 "$peer" tool kafka-topics --bootstrap-server "$addr" --delete --topic "$t" \
        >/dev/null 2>&1 || true
      echo "   [$who r$r] producer: $(tail -n 1 "$f-producer.txt" 2>/dev/null)"
      echo "   [$who r$r] consumer: $(tail -n 1 "$f-consumer.txt" 2>/dev/null)"
    done
  done
  after=$(load)
  [ "$rc" = 0 ] || why_failed "$dir" "$rc"
  echo "   took $((SECONDS - t0)) s; load after $after"
  record "$id" "$mode" perf "Kafka's Java ProducerPerformance and ConsumerPerformance, $n x 1 KiB records, 6 partitions" "$rc" \
    "$before" "$after" $((SECONDS - t0))
}

# How long each broker took to create the partitions of the topics a case made, from its log:
# ringlog logs "partition T/N opened on core", Kafka "Created log for partition T-N" (and its
# controller "CreateTopics result(s)"). Only the log lines after LINE0 count.
# CASE_DIR RINGLOG_LOG RINGLOG_LINE0 KAFKA_LOG KAFKA_LINE0 TOPIC_PREFIX_RINGLOG TOPIC_PREFIX_KAFKA
creation_spans() {
  python3 - "$@" <<'PY' || true
import datetime, re, sys
d, rl, r0, kl, k0, rp, kp = sys.argv[1:8]
def lines(path, skip):
    try:
        with open(path, errors="replace") as f:
            for i, ln in enumerate(f):
                if i >= int(skip):
                    yield ln
    except OSError:
        return
def rts(t):
    return datetime.datetime.strptime(t[:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
def kts(t):
    return datetime.datetime.strptime(t, "%Y-%m-%d %H:%M:%S,%f")
out = []
topics = {}
pat = re.compile(r"^(\S+Z) .*partition (" + re.escape(rp) + r"\S*?)/(\d+) opened on core")
for ln in lines(rl, r0):
    m = pat.search(ln)
    if m:
        t = topics.setdefault(("ringlog", m.group(2)), [None, None, 0, None])
        ts = rts(m.group(1))
        t[0] = t[0] or ts
        t[1] = ts
        t[2] += 1
kpat = re.compile(r"^\[([\d-]+ [\d:]+,\d+)\] INFO Created log for partition (" + re.escape(kp) + r"\S*?)-(\d+) in ")
cpat = re.compile(r"^\[([\d-]+ [\d:]+,\d+)\] INFO \[QuorumController id=\d+\] CreateTopics result\(s\): CreatableTopic\(name='(" + re.escape(kp) + r"[^']*)'")
for ln in lines(kl, k0):
    m = kpat.search(ln)
    if m:
        t = topics.setdefault(("kafka", m.group(2)), [None, None, 0, None])
        ts = kts(m.group(1))
        t[0] = t[0] or ts
        t[1] = ts
        t[2] += 1
        continue
    m = cpat.search(ln)
    if m:
        topics.setdefault(("kafka", m.group(2)), [None, None, 0, None])[3] = kts(m.group(1))
for (who, topic), (first, last, n, created) in sorted(topics.items()):
    span = (last - first).total_seconds() if first and last else None
    line = f"{who} {topic}: {n} partitions created"
    if span is not None:
        line += f", first {first:%H:%M:%S.%f}"[:-3] + f", last {last:%H:%M:%S.%f}"[:-3] + f": {span:.1f} s"
    if created and last:
        line += f"; the last {(last - created).total_seconds():.1f} s after the controller's CreateTopics"
    out.append(line)
text = "\n".join(out) if out else "no partition creation found in the logs"
with open(d + "/creation.txt", "w") as f:
    f.write(text + "\n")
print("\n".join("   " + ln for ln in text.splitlines()))
PY
}
nlines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# A partition-heavy bench case, with each broker's partition creation span. ARGS as bench_case.
partition_case() {
  local r0 k0
  r0=$(nlines "$ringlog_log") k0=$(nlines "$kafka_log")
  case_warmup=$part_warmup bench_case "$@"
  creation_spans "$out/$1" "$ringlog_log" "$r0" "$kafka_log" "$k0" rlb-a rlb-b
}

run_single_case() { # MODE CASE
  local m=$1 c=$2 id=$1-$2
  case $c in
    low) bench_case "$id" "$m" "$c" "1,000 msg/s, 1 partition, 1 KiB, 1 producer + 1 consumer, linger 0, fsync probe" 30 \
      -w "$wl/1-topic-1-partition-1kb-1p-1c-1k-rate.yaml" --linger-ms 0 \
      --fsync-probe "$work/fsync-probe" --fsync-count 2000 ;;
    mid) bench_case "$id" "$m" "$c" "20,000 msg/s, 6 partitions, 1 KiB, 2 producers + 2 consumers" 0 \
      -w "$wl/1-topic-6-partitions-1kb-2p-2c-20k-rate.yaml" ;;
    max) bench_case "$id" "$m" "$c" "max rate, 6 partitions, 1 KiB, 2 producers + 2 consumers" 0 \
      -w "$wl/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml" ;;
    lz4 | zstd) bench_case "$id" "$m" "$c" "max rate, 6 partitions, 1 KiB half-random payloads, $c batches" 0 \
      -w "$work/max-rate-compressible.yaml" --compression "$c" ;;
    p1000) partition_case "$id" "$m" "$c" "max rate, 1,000 partitions, 1 KiB, 2 producers + 2 consumers, ${part_warmup} s warm-up" 60 \
      -w "$wl/1-topic-100-partitions-1kb-2p-2c-max-rate.yaml" --partitions 1000 \
      --name "1 topic / 1000 partitions / 1kb / 2 producers / 2 consumers / max rate" \
      --ready-timeout-secs 120 ;;
    p10000)
      if [[ " $p10000_modes " != *" $m "* ]]; then
        echo
        echo "== $id: skipped (P10000_MODES=\"$p10000_modes\")"
        return 0
      fi
      restart_next=1
      case_warmup_p=$part_warmup part_warmup=$p10000_warmup
      partition_case "$id" "$m" "$c" "max rate, $p10000_partitions partitions, 1 KiB, 2 producers + 2 consumers, ${p10000_warmup} s warm-up" $((p10000_warmup + 120)) \
        -w "$wl/1-topic-10000-partitions-1kb-2p-2c-max-rate.yaml" --partitions "$p10000_partitions" \
        --name "1 topic / $p10000_partitions partitions / 1kb / 2 producers / 2 consumers / max rate" \
        --ready-timeout-secs 180
      part_warmup=$case_warmup_p ;;

    backlog)
      if [[ " $backlog_modes " != *" $m "* ]]; then
        echo
        echo "== $id: skipped (BACKLOG_MODES=\"$backlog_modes\")"
        return 0
      fi
      # Fill time at the set rate, three times over, bounds the case.
      local fill
      fill=$(awk -v g="$backlog_gb" -v r="$backlog_rate" 'BEGIN { printf "%d", g * 1100000 / r * 3 + 60 }')
      bench_case "$id" "$m" "$c" "${backlog_gb} GiB backlog at $backlog_rate msg/s, 6 partitions, then 2 consumers drain it" "$fill" \
        -w "$wl/1-topic-6-partitions-1kb-2p-2c-20k-rate.yaml" --rate "$backlog_rate" \
        --backlog-gb "$backlog_gb" --drain-timeout-secs 120 \
        --name "1 topic / 6 partitions / 1kb / ${backlog_gb} GiB backlog drain" ;;
    perf) perf_case "$id" "$m" ;;
    *) echo "peer-bench: unknown case $c" >&2; exit 2 ;;
  esac
}

# ---- the run -------------------------------------------------------------------------------
single_cases="" rf3_cases=""
for c in $cases; do
  case $c in
    rf3 | rf3mid) rf3_cases+=" $c" ;;
    low | mid | max | lz4 | zstd | p1000 | p10000 | backlog | perf) single_cases+=" $c" ;;
    *) echo "peer-bench: unknown case $c (low mid max lz4 zstd p1000 perf backlog p10000 rf3 rf3mid)" >&2; exit 2 ;;
  esac
done

for m in $modes; do
  [ "$m" = default ] || [ "$m" = durable ] || { echo "peer-bench: unknown mode $m" >&2; exit 2; }
  if [ -n "$single_cases" ]; then
    echo
    echo "#### Kafka mode: $m; single nodes (ringlog --cores $cores, Kafka KRaft broker+controller)"
    start_ringlog_single "ringlog-$m"
    start_kafka_single "kafka-$m" "$m" "ringlog-$m"
    restart_next=0
    for c in $single_cases; do
      if ! brokers_alive || [ "$restart_next" = 1 ]; then
        # A broker that is down, or one still busy with (or holding) 10,000 partitions.
        echo "   restarting both brokers with fresh data"
        stop_ringlog
        stop_kafka
        start_ringlog_single "ringlog-$m"
        start_kafka_single "kafka-$m" "$m" "ringlog-$m"
        restart_next=0
      fi
      run_single_case "$m" "$c"
    done
    stop_ringlog
    stop_kafka
  fi
  if [ -n "$rf3_cases" ]; then
    echo
    echo "#### Kafka mode: $m; three-node clusters (ringlog --cores $rf3_cores per node, Kafka KRaft)"
    start_ringlog_cluster "ringlog-cluster-$m"
    start_kafka_cluster "kafka-cluster-$m" "$m"
    for c in $rf3_cases; do
      case $c in
        rf3) bench_case "$m-rf3" "$m" rf3 "replication factor 3 on three local nodes, max rate, 6 partitions, 1 KiB, 2 producers + 2 consumers" 30 \
          -w "$wl/1-topic-6-partitions-1kb-2p-2c-max-rate.yaml" --replication-factor 3 ;;
        rf3mid) bench_case "$m-rf3mid" "$m" rf3mid "replication factor 3 on three local nodes, 20,000 msg/s, 6 partitions, 1 KiB, 2 producers + 2 consumers" 30 \
          -w "$wl/1-topic-6-partitions-1kb-2p-2c-20k-rate.yaml" --replication-factor 3 ;;
      esac
    done
    stop_ringlog
    stop_kafka
  fi
done

summarize
echo
echo "#### done in $((SECONDS - t_all)) s; load $(load)"
echo "summary: $out/summary.md"
