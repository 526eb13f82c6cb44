//! Fuzz target `segment_recovery`: see `ringlog_fuzz::segment_recovery` and `scripts/fuzz.sh`.

ringlog_fuzz::fuzz_main!(segment_recovery);
