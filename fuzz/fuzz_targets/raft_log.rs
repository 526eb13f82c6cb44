//! Fuzz target `raft_log`: see `ringlog_fuzz::raft_log` and `scripts/fuzz.sh`.

ringlog_fuzz::fuzz_main!(raft_log);
