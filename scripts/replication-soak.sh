#!/usr/bin/env bash
# Issue #18's long trial: the replication tests with 100 SIGKILLs of the leader's node (CI runs
# 20). RINGLOG_TEST_SEED reproduces a run's kill moments.
#
# usage: scripts/replication-soak.sh [TRIALS]
set -euo pipefail
export RINGLOG_REPLICATION_TRIALS=${1:-100}
exec cargo nextest run -p ringlog-ops --test replication --no-capture
