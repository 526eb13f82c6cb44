//! The cursor's whole durable state: `fanout-<child>.offset` in the parent partition's
//! directory, `{"epoch":"…","next_offset":N}`. The file itself belongs to the parent's
//! `engine::Partition` (`store_cursor_file`: temp + fsync + rename + dir fsync, off the
//! executor); this module owns its content and the start decision. It is written only after
//! the slab below `next_offset` is durable in the child.

use serde::{Deserialize, Serialize};

/// The content of one offset file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CursorFile {
    /// The attachment this position belongs to (16 hex characters).
    pub epoch: String,
    /// The first parent offset not yet committed to the child.
    pub next_offset: u64,
}

impl CursorFile {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a string and a number always serialize")
    }

    /// Parses a file's bytes; `None` when they do not parse (treated like a foreign epoch:
    /// never resumed).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// What the parent partition holds for a cursor: no file, a file that parsed, or one that did
/// not (or could not be read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    Missing,
    Found(CursorFile),
    Unreadable,
}

impl Stored {
    /// From what `Partition::load_cursor_file` returned.
    pub fn from_load(r: std::io::Result<Option<Vec<u8>>>) -> Self {
        match r {
            Ok(None) => Stored::Missing,
            Ok(Some(b)) => CursorFile::decode(&b).map_or(Stored::Unreadable, Stored::Found),
            Err(_) => Stored::Unreadable,
        }
    }
}

/// Where a starting cursor begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// The file belongs to this attachment: resume at its offset.
    Resume(u64),
    /// No file: a fresh attachment, start at the link's attach offset (no backfill).
    Fresh(u64),
    /// The file belongs to another epoch (or is unreadable): never resumed. Starting at the
    /// attach offset overwrites it (tail-anchoring), which needs the metastore leader to
    /// confirm the epoch first; unconfirmed, the reconciler retries a second later.
    AnchorNeedsConfirmation(u64),
}

/// Decides where a cursor of attachment `epoch` starts, given what the file holds.
pub fn decide_start(file: &Stored, epoch: &str, attach_offset: u64) -> Start {
    match file {
        Stored::Found(f) if f.epoch == epoch => Start::Resume(f.next_offset),
        Stored::Missing => Start::Fresh(attach_offset),
        _ => Start::AnchorNeedsConfirmation(attach_offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_format_round_trips() {
        let s = CursorFile {
            epoch: "67953471cc57a32a".into(),
            next_offset: 98332,
        };
        assert_eq!(
            s.encode(),
            br#"{"epoch":"67953471cc57a32a","next_offset":98332}"#.to_vec()
        );
        assert_eq!(CursorFile::decode(&s.encode()), Some(s.clone()));
        assert_eq!(
            Stored::from_load(Ok(Some(b"{garbage".to_vec()))),
            Stored::Unreadable
        );
        assert_eq!(Stored::from_load(Ok(None)), Stored::Missing);
        assert_eq!(Stored::from_load(Ok(Some(s.encode()))), Stored::Found(s));
    }

    #[test]
    fn stale_epoch_is_never_resumed() {
        let f = |e: &str, n| {
            Stored::Found(CursorFile {
                epoch: e.into(),
                next_offset: n,
            })
        };
        assert_eq!(decide_start(&f("aa", 7), "aa", 3), Start::Resume(7));
        assert_eq!(
            decide_start(&f("bb", 7), "aa", 3),
            Start::AnchorNeedsConfirmation(3)
        );
        assert_eq!(decide_start(&Stored::Missing, "aa", 3), Start::Fresh(3));
        assert_eq!(
            decide_start(&Stored::Unreadable, "aa", 3),
            Start::AnchorNeedsConfirmation(3)
        );
    }
}
