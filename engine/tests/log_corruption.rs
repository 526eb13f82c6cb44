//! Recovery against damage: 1,000 seeded trials that truncate the active segment at a random
//! byte or flip a random byte in it, then reopen. The log must hold exactly the batches before
//! the damage, never return a batch that fails its CRC, and accept appends afterwards.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use engine::{batch, Durability, LogConfig, PartitionLog};
use rand::{Rng, SeedableRng};

const TRIALS: u64 = 1_000;
const SEGMENT_BYTES: u64 = 32 << 10;

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn active_log(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

fn config() -> LogConfig {
    LogConfig {
        preallocate_bytes: 0,
        ..small_config(SEGMENT_BYTES)
    }
}

#[test]
fn thousand_seeded_truncations_and_bit_flips() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let core = core(&root, 8).await;
        // Template: two closed segments and an active one, left by an unclean stop.
        let template = root.join("template");
        let (log, _) = PartitionLog::open(&core, template.clone(), config())
            .await
            .unwrap();
        let mut stored = Vec::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
        while log.segment_count() < 3 || stored.len() < 60 {
            let b = batch(
                stored.len() as u64,
                rng.gen_range(1..6),
                rng.gen_range(0..900),
                1,
            );
            let info = log.append(&b, Durability::Sync).await.unwrap();
            stored.push(as_stored(b, info.base_offset));
        }
        drop(log);
        glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        let active_path = active_log(&template);
        let active_base: u64 = active_path
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let active_len = fs::metadata(&active_path).unwrap().len();
        // Where each batch of the active segment lies in its file.
        let mut in_active = Vec::new();
        let mut pos = 0u64;
        for (i, b) in stored.iter().enumerate() {
            let h = batch::parse_header(b).unwrap();
            if h.base_offset as u64 >= active_base {
                in_active.push((i, pos, pos + b.len() as u64));
                pos += b.len() as u64;
            }
        }
        assert!(
            in_active.len() >= 2,
            "the active segment holds several batches"
        );
        let first_active = in_active[0].0;

        let mut truncations = 0;
        let mut flips = 0;
        for trial in 0..TRIALS {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(trial);
            let pdir = root.join(format!("trial/p{trial:05}"));
            copy_dir(&template, &pdir);
            let target = pdir.join(active_path.file_name().unwrap());
            let mut bytes = fs::read(&target).unwrap();
            assert_eq!(bytes.len() as u64, active_len);
            let at = rng.gen_range(0..active_len);
            let truncate = rng.gen_bool(0.5);
            // Batches of the active segment that lie wholly before the damage survive.
            let mut expect_end = first_active;
            let mut epoch_flip = false;
            if truncate {
                truncations += 1;
                bytes.truncate(at as usize);
                for &(i, _, end) in &in_active {
                    if end <= at {
                        expect_end = i + 1;
                    }
                }
            } else {
                flips += 1;
                let bit = 1u8 << rng.gen_range(0..8);
                bytes[at as usize] ^= bit;
                expect_end = stored.len();
                for &(i, start, end) in &in_active {
                    if (start..end).contains(&at) {
                        let rel = (at - start) as usize;
                        // The leader epoch lies outside the CRC by Kafka's design: a flip there
                        // leaves a valid batch.
                        epoch_flip =
                            (batch::LEADER_EPOCH_POS..batch::LEADER_EPOCH_POS + 4).contains(&rel);
                        if !epoch_flip {
                            expect_end = i;
                        }
                    }
                }
            }
            fs::write(&target, &bytes).unwrap();

            let (log, summary) = PartitionLog::open(&core, pdir.clone(), config())
                .await
                .unwrap_or_else(|e| panic!("trial {trial}: reopen failed: {e}"));
            assert!(!summary.clean_shutdown);
            let got = read_all(&log, 0).await; // validates every CRC
            assert_eq!(
                got.len(),
                expect_end,
                "trial {trial}: truncate={truncate} at {at}, summary {summary:?}"
            );
            for (k, b) in got.iter().enumerate() {
                if epoch_flip {
                    assert_eq!(
                        b[batch::MAGIC_POS..],
                        stored[k][batch::MAGIC_POS..],
                        "trial {trial} batch {k}"
                    );
                } else {
                    assert_eq!(b, &stored[k], "trial {trial} batch {k}");
                }
            }
            let next = got.last().map_or(0, |b| {
                batch::parse_header(b).unwrap().last_offset() as u64 + 1
            });
            assert_eq!(log.high_watermark(), next, "trial {trial}");
            let fresh = batch(10_000 + trial, 2, 50, 7);
            let info = log
                .append(&fresh, Durability::Sync)
                .await
                .expect("append after recovery");
            assert_eq!(
                info.base_offset, next,
                "trial {trial}: appends continue at the recovered end"
            );
            let tail = log.read(next, 1 << 20).await.unwrap();
            assert_eq!(split_batches(&tail), vec![as_stored(fresh, next)]);
            log.close().await.unwrap();
            fs::remove_dir_all(&pdir).unwrap();
        }
        assert!(
            truncations > 400 && flips > 400,
            "both kinds of damage ran: {truncations} / {flips}"
        );
    });
}
