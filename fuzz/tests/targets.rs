//! Every fuzz target as a plain test: the committed corpus and crash regressions replay, then
//! a bounded set of seeded mutations of each corpus input (bit flips, byte overwrites with
//! extreme values, truncations, insertions). Coverage-guided runs: `scripts/fuzz.sh`.

/// As in the `ringlog` binary: oversized up-front reservations cost no memory.
#[global_allocator]
static ALLOCATOR: net::lazy_reserve::LazyReserve = net::lazy_reserve::LazyReserve;

/// Mutations per corpus input (keeps each target's test to seconds); the live-broker target
/// waits up to 50 ms per input, so it gets fewer.
const MUTATIONS_PER_INPUT: usize = 64;
const MUTATIONS_PER_DISPATCH_INPUT: usize = 6;

/// A small deterministic generator (no dependency; the same mutations every run).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(input: &[u8], rng: &mut SplitMix) -> Vec<u8> {
    let mut b = input.to_vec();
    if b.is_empty() {
        return vec![rng.next() as u8];
    }
    match rng.below(5) {
        0 => {
            let i = rng.below(b.len());
            b[i] ^= 1 << rng.below(8);
        }
        1 => {
            const EXTREMES: [[u8; 4]; 4] = [
                [0x7f, 0xff, 0xff, 0xf0],
                [0xff, 0xff, 0xff, 0xff],
                [0x80, 0, 0, 0],
                [0, 0, 0, 0],
            ];
            let i = rng.below(b.len());
            let e = EXTREMES[rng.below(4)];
            for (k, v) in e.iter().enumerate() {
                if let Some(x) = b.get_mut(i + k) {
                    *x = *v;
                }
            }
        }
        2 => b.truncate(rng.below(b.len())),
        3 => {
            let i = rng.below(b.len());
            b.insert(i, rng.next() as u8);
        }
        _ => {
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
        }
    }
    b
}

fn replay(target: &str) {
    let mutations = if target == "request_dispatch" {
        MUTATIONS_PER_DISPATCH_INPUT
    } else {
        MUTATIONS_PER_INPUT
    };
    let files = ringlog_fuzz::corpus_files(target);
    assert!(!files.is_empty(), "no committed corpus for {target}");
    let mut rng = SplitMix(0x5eed ^ target.len() as u64);
    for (path, data) in &files {
        ringlog_fuzz::run_target(target, data);
        let mut m = data.clone();
        for i in 0..mutations {
            m = if i % 8 == 0 {
                mutate(data, &mut rng)
            } else {
                mutate(&m, &mut rng)
            };
            let res = std::panic::catch_unwind(|| ringlog_fuzz::run_target(target, &m));
            if res.is_err() {
                panic!(
                    "{target}: mutation {i} of {} fails; input (hex): {}",
                    path.display(),
                    m.iter().map(|b| format!("{b:02x}")).collect::<String>()
                );
            }
        }
    }
}

#[test]
fn request_decode() {
    replay("request_decode");
}

#[test]
fn request_dispatch() {
    replay("request_dispatch");
}

#[test]
fn record_batch() {
    replay("record_batch");
}

#[test]
fn segment_recovery() {
    replay("segment_recovery");
}

#[test]
fn raft_log() {
    replay("raft_log");
}

#[test]
fn meta_snapshot() {
    replay("meta_snapshot");
}
