//! Fuzz target `meta_snapshot` (see `ringlog_fuzz::meta_snapshot`). Under `cargo afl build` it is an AFL++
//! persistent-mode target; a plain build replays the files named on the command line.

#[global_allocator]
static ALLOCATOR: net::lazy_reserve::LazyReserve = net::lazy_reserve::LazyReserve;

#[cfg(fuzzing)]
fn main() {
    afl::fuzz!(|data: &[u8]| ringlog_fuzz::meta_snapshot(data));
}

#[cfg(not(fuzzing))]
fn main() {
    for path in std::env::args_os().skip(1) {
        let data = std::fs::read(&path).expect("read input");
        eprintln!("replaying {}", std::path::Path::new(&path).display());
        ringlog_fuzz::meta_snapshot(&data);
    }
}
