//! Snapshots of a runner's partition state, keyed by the partition and the epoch of the cut
//! they were taken at (seed 003, "The snapshot"). The bytes are the container krabka's runners
//! share (`kfc4::encode_snapshot`: version 1, count, length-prefixed name/value pairs sorted
//! by name); only the storage key carries the epoch.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The epoch a rebalance saves and loads under, apart from every barrier snapshot (cut
/// epochs start at 1).
pub const NO_EPOCH: i64 = -1;

#[derive(Debug, thiserror::Error)]
pub enum StateStoreError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("snapshot {path}: {source}")]
    Format {
        path: PathBuf,
        source: crate::BarrierFormatError,
    },
    #[error("snapshot name {name:?} is not UTF-8")]
    Name { name: Vec<u8> },
}

/// Where snapshots live.
pub trait StateStore {
    /// The snapshot of `partition` at `epoch`; empty when none was saved.
    fn load(
        &self,
        partition: i32,
        epoch: i64,
    ) -> Result<BTreeMap<String, Vec<u8>>, StateStoreError>;
    /// Saves `snapshot` as `partition`'s at `epoch`, durably, replacing any earlier one.
    fn save(
        &self,
        partition: i32,
        epoch: i64,
        snapshot: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), StateStoreError>;
}

/// How many epochs of each partition a [`FileStateStore`] keeps by default: a cut older
/// than the broker's `retained_cuts` cannot be restored to anyway.
pub const DEFAULT_RETAINED_EPOCHS: u32 = 100;

/// Snapshots as files: `<dir>/p<partition>/e<epoch>.snapshot` (`none.snapshot` for
/// [`NO_EPOCH`]), written to a temporary file, fsynced and renamed into place. Saving epoch
/// E removes the partition's snapshots of epochs at or below E − `retained_epochs`.
pub struct FileStateStore {
    dir: PathBuf,
    retained_epochs: u32,
}

impl FileStateStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            retained_epochs: DEFAULT_RETAINED_EPOCHS,
        }
    }

    /// Keeps the newest `retained_epochs` epochs of each partition (at least 1).
    pub fn with_retained_epochs(mut self, retained_epochs: u32) -> Self {
        self.retained_epochs = retained_epochs.max(1);
        self
    }

    /// Removes `dir`'s snapshots of epochs at or below `below_or_at`.
    fn prune(&self, dir: &Path, below_or_at: i64) -> Result<(), StateStoreError> {
        for entry in std::fs::read_dir(dir).map_err(io("listing", dir))? {
            let path = entry.map_err(io("listing", dir))?.path();
            let epoch = path.file_name().and_then(|n| n.to_str()).and_then(|n| {
                n.strip_prefix('e')?
                    .strip_suffix(".snapshot")?
                    .parse::<i64>()
                    .ok()
            });
            if epoch.is_some_and(|e| e <= below_or_at) {
                std::fs::remove_file(&path).map_err(io("removing", &path))?;
            }
        }
        Ok(())
    }

    fn path(&self, partition: i32, epoch: i64) -> PathBuf {
        let name = if epoch == NO_EPOCH {
            "none.snapshot".to_string()
        } else {
            format!("e{epoch}.snapshot")
        };
        self.dir.join(format!("p{partition}")).join(name)
    }
}

fn io<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> StateStoreError + 'a {
    move |source| StateStoreError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl StateStore for FileStateStore {
    fn load(
        &self,
        partition: i32,
        epoch: i64,
    ) -> Result<BTreeMap<String, Vec<u8>>, StateStoreError> {
        let path = self.path(partition, epoch);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(io("reading", &path)(e)),
        };
        let entries = kfc4::decode_snapshot(&bytes).map_err(|source| StateStoreError::Format {
            path: path.clone(),
            source,
        })?;
        entries
            .into_iter()
            .map(|(k, v)| match String::from_utf8(k) {
                Ok(name) => Ok((name, v)),
                Err(e) => Err(StateStoreError::Name {
                    name: e.into_bytes(),
                }),
            })
            .collect()
    }

    fn save(
        &self,
        partition: i32,
        epoch: i64,
        snapshot: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), StateStoreError> {
        let path = self.path(partition, epoch);
        let dir = path.parent().expect("a snapshot path has a directory");
        std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
        let entries: BTreeMap<Vec<u8>, Vec<u8>> = snapshot
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
            .collect();
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(io("creating", &tmp))?;
        f.write_all(&kfc4::encode_snapshot(&entries))
            .and_then(|_| f.sync_all())
            .map_err(io("writing", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io("renaming into", &path))?;
        if epoch != NO_EPOCH {
            self.prune(dir, epoch - i64::from(self.retained_epochs))?;
        }
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing", dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_by_partition_and_epoch_in_the_shared_container() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStateStore::new(dir.path());
        let snap = BTreeMap::from([
            ("word:b".to_string(), 2u64.to_be_bytes().to_vec()),
            ("word:a".to_string(), 1u64.to_be_bytes().to_vec()),
        ]);
        store.save(3, 7, &snap).unwrap();
        store.save(3, NO_EPOCH, &BTreeMap::new()).unwrap();
        assert_eq!(store.load(3, 7).unwrap(), snap);
        assert!(store.load(3, NO_EPOCH).unwrap().is_empty());
        assert!(store.load(3, 8).unwrap().is_empty(), "none saved: empty");
        // The file is the container: version 1, count 2, names sorted.
        let bytes = std::fs::read(dir.path().join("p3/e7.snapshot")).unwrap();
        assert_eq!(&bytes[..8], &[0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(&bytes[12..18], b"word:a");
        // Old epochs go: with 2 retained, saving epoch 9 removes epoch 7.
        let store = store.with_retained_epochs(2);
        store.save(3, 8, &snap).unwrap();
        store.save(3, 9, &snap).unwrap();
        assert!(!dir.path().join("p3/e7.snapshot").exists());
        assert_eq!(store.load(3, 8).unwrap(), snap);
        assert!(
            dir.path().join("p3/none.snapshot").exists(),
            "NO_EPOCH stays"
        );
        store.save(3, 7, &snap).unwrap();
        // A damaged file is an error naming it, never a panic.
        std::fs::write(dir.path().join("p3/e7.snapshot"), &bytes[..9]).unwrap();
        let e = store.load(3, 7).unwrap_err();
        assert!(e.to_string().contains("e7.snapshot"), "{e}");
    }
}
