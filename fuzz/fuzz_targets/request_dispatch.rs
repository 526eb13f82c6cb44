//! Fuzz target `request_dispatch`: see `ringlog_fuzz::request_dispatch` and `scripts/fuzz.sh`.

ringlog_fuzz::fuzz_main!(request_dispatch);
