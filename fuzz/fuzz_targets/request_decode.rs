//! Fuzz target `request_decode`: see `ringlog_fuzz::request_decode` and `scripts/fuzz.sh`.

ringlog_fuzz::fuzz_main!(request_decode);
