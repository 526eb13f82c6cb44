//! Fuzz target `record_batch`: see `ringlog_fuzz::record_batch` and `scripts/fuzz.sh`.

ringlog_fuzz::fuzz_main!(record_batch);
