#!/usr/bin/env bash
# The whole test suite, on a fresh machine too: provisions what the tests need
# (scripts/provision.sh), then runs every test with cargo-nextest. Extra arguments go to
# `cargo nextest run` (e.g. `scripts/test.sh -p ringlog-engine`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/provision.sh
exec cargo nextest run --workspace "$@"
