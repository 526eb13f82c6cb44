# shellcheck shell=bash
# Sourced by scripts/*-bench.sh: the scratch folder, the background processes and the wait for a
# broker that the benchmarks share.
#
#   bench_init NAME   $work: a fresh folder, ${TMPDIR:-/tmp}/ringlog-NAME-XXXXXX; $pids: the
#                     background processes (add with pids+=($!)). On exit every process in $pids
#                     is killed and reaped and $work is removed.
#   bench_out NAME    $out: $OUT, or /tmp/ringlog-NAME-bench without it; made if missing
#   bench_stop        kills and reaps every process in $pids, and empties it
#   bench_wait_ready BIN ADDR [TRIES]
#                     asks `BIN topic list` at ADDR every 0.1 s until it answers, at most TRIES
#                     times (default 100); returns 1 if it never answers (a caller that goes on
#                     regardless writes `|| true`)

bench_init() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/ringlog-$1-XXXXXX")
  pids=()
  trap 'bench_stop; rm -rf "$work"' EXIT
}

bench_out() {
  out=${OUT:-/tmp/ringlog-$1-bench}
  mkdir -p "$out"
}

bench_stop() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

bench_wait_ready() {
  local _
  for _ in $(seq "${3:-100}"); do
    "$1" topic list --brokers "$2" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
