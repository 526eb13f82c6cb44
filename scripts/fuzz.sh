#!/usr/bin/env bash
# Coverage-guided fuzzing of ringlog's hostile-input paths with AFL++ (cargo-afl, stable Rust).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Builds the targets of the `fuzz` package instrumented (target dir target/afl, so the normal
# build cache is untouched), runs each for SECONDS_PER_TARGET (default 60) from its committed
# corpus fuzz/corpus/<target>/, prints executions, executions per second and crashes per
# target, and exits 1 if any target crashed (afl-fuzz itself exits 0 on crashes). Crashing
# inputs are copied to target/afl-crashes/<target>/; to keep one as a regression test, copy it
# to fuzz/regressions/<target>/ under a plain name (tests/targets.rs replays that folder).
# Long runs: scripts/fuzz.sh 3600. CI runs a short smoke (.ci/run: scripts/fuzz.sh 5).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(request_decode request_dispatch record_batch segment_recovery raft_log meta_snapshot)
fi

if ! cargo afl --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-afl (builds AFL++ from the crate's bundled source)" >&2
  . scripts/install-step.sh
  install_step cargo-afl "$CARGO_INSTALL_LIMIT_SECS" "cargo install cargo-afl --locked --version 0.18.2" \
    cargo install cargo-afl --locked --version 0.18.2
fi
# AFL++ itself (built once into ~/.local/share/afl.rs by cargo-afl).
cargo afl config --build >/dev/null 2>&1 || true

export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1
td=target/afl
cargo afl build -p ringlog-fuzz --target-dir "$td"

fail=0
total_execs=0
for t in "${targets[@]}"; do
  out="target/afl-out/$t"
  rm -rf "$out"
  mkdir -p "$out"
  timeout_ms=1000
  [ "$t" = request_dispatch ] && timeout_ms=10000
  cargo afl fuzz -V "$secs" -t "$timeout_ms" -i "fuzz/corpus/$t" -o "$out" "$td/debug/$t" \
    >"$out/afl.log" 2>&1 </dev/null || { echo "$t: afl-fuzz failed:"; tail -20 "$out/afl.log"; fail=1; continue; }
  stats="$out/default/fuzzer_stats"
  execs=$(awk '/^execs_done/{print $3}' "$stats")
  eps=$(awk '/^execs_per_sec/{print $3}' "$stats")
  crashes=$(awk '/^saved_crashes/{print $3}' "$stats")
  edges=$(awk '/^edges_found/{print $3}' "$stats")
  echo "fuzz $t: ${secs}s, execs_done=$execs execs_per_sec=$eps edges_found=$edges crashes=$crashes"
  total_execs=$((total_execs + execs))
  if [ "${crashes:-0}" != 0 ]; then
    mkdir -p "target/afl-crashes/$t"
    cp "$out"/default/crashes/id:* "target/afl-crashes/$t/" 2>/dev/null || true
    echo "fuzz $t: CRASHES, inputs in target/afl-crashes/$t/ (replay: $td/debug/$t < FILE)"
    fail=1
  fi
done
echo "fuzz: $total_execs executions in all"
exit $fail
