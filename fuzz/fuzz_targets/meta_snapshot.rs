//! Fuzz target `meta_snapshot`: see `ringlog_fuzz::meta_snapshot` and `scripts/fuzz.sh`.

ringlog_fuzz::fuzz_main!(meta_snapshot);
