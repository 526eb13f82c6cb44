//! The group and injection-start values as ringlog builds before the KFC-4 layouts wrote them
//! (version 0 too, so the bytes tell them apart), read so that an upgraded broker keeps the
//! groups and cuts of its data directory. Nothing writes them any more: the coordinator
//! rewrites a group record it read in this layout, and an injection start is tombstoned
//! with its cut. The key and the cut value never changed.
//!
//! ```text
//! 0 group:           version i16 = 0 | interval_ms i64 | retained_cuts i32 | topics [str16]
//! 1 injection start: version i16 = 0 | triggered_at i64
//!                    | targets [topic str16 | partitions [partition i32 | start_offset i64]]
//! ```
//!
//! [`decode_record`] takes the KFC-4 layout first and this one only for bytes that are not a
//! valid KFC-4 value (a group value with no topic, or one that does not decode): a KFC-4
//! group always names a topic, and the two layouts rarely decode the same bytes at all.

use crate::{
    decode_group_value, decode_injection_start, decode_key, FormatError, GroupValue,
    InjectionStart, Reader, RecordKind, StateKey, StateRecord, MAX_TOPIC_NAME_BYTES,
    STR16_MIN_BYTES,
};

/// Which layout a decoded record was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// KFC-4's (every tombstone, key and cut value too).
    Kfc4,
    /// An earlier ringlog build's (a group or injection-start value).
    Legacy,
}

/// Decodes a group value in the earlier layout; its `last_epoch` is 0 (the layout had none:
/// the group's cuts tell it).
pub fn decode_group_value_legacy(bytes: &[u8]) -> Result<GroupValue, FormatError> {
    let mut r = Reader::new("legacy group value", bytes);
    r.version("version")?;
    let interval_ms = Some(r.i64("interval_ms")?).filter(|ms| *ms >= 0);
    let retained_cuts = r.i32("retained_cuts")?;
    let topics = r.array("topics", STR16_MIN_BYTES, |r| {
        r.str16("topics[]", MAX_TOPIC_NAME_BYTES)
    })?;
    r.finish()?;
    Ok(GroupValue {
        topics,
        interval_ms,
        retained_cuts,
        last_epoch: 0,
    })
}

/// Decodes an injection-start value in the earlier layout: each topic's partition count is
/// one past the highest partition it froze; the coordinator epoch (which it had not) is 0.
pub fn decode_injection_start_legacy(bytes: &[u8]) -> Result<InjectionStart, FormatError> {
    let mut r = Reader::new("legacy injection-start value", bytes);
    r.version("version")?;
    let triggered_at_ms = r.i64("triggered_at")?;
    let targets = r
        .topic_offsets("targets")?
        .into_iter()
        .map(|(topic, partitions)| {
            let count = partitions
                .iter()
                .map(|(p, _)| p.saturating_add(1))
                .max()
                .unwrap_or(0);
            (topic, count)
        })
        .collect();
    r.finish()?;
    Ok(InjectionStart {
        coordinator_epoch: 0,
        triggered_at_ms,
        targets,
    })
}

/// Decodes one `__barrier_state` record in either layout (see the module doc), and says
/// which one it was.
pub fn decode_record(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(StateRecord, Layout), FormatError> {
    let StateKey { kind, group, epoch } = decode_key(key)?;
    let Some(value) = value else {
        return crate::decode_record(key, None).map(|r| (r, Layout::Kfc4));
    };
    match kind {
        RecordKind::Group => {
            let (value, layout) = match decode_group_value(value) {
                Ok(v) if !v.topics.is_empty() => (v, Layout::Kfc4),
                kfc4 => match decode_group_value_legacy(value) {
                    Ok(v) => (v, Layout::Legacy),
                    Err(legacy) => return Err(kfc4.err().unwrap_or(legacy)),
                },
            };
            Ok((
                StateRecord::Group {
                    group,
                    value: Some(value),
                },
                layout,
            ))
        }
        RecordKind::InjectionStart => {
            let (value, layout) = match decode_injection_start(value) {
                Ok(v) => (v, Layout::Kfc4),
                Err(kfc4) => match decode_injection_start_legacy(value) {
                    Ok(v) => (v, Layout::Legacy),
                    Err(_) => return Err(kfc4),
                },
            };
            Ok((
                StateRecord::InjectionStart {
                    group,
                    epoch,
                    value: Some(value),
                },
                layout,
            ))
        }
        RecordKind::Cut => crate::decode_record(key, Some(value)).map(|r| (r, Layout::Kfc4)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode_group_value, encode_injection_start, encode_key};

    /// The earlier layouts, byte by byte, as those builds wrote them.
    #[test]
    fn earlier_values_decode_and_are_told_apart() {
        let group_key = encode_key(&StateKey::group("g2"));
        let legacy_group: Vec<u8> = vec![
            0x00, 0x00, // version 0
            0, 0, 0, 0, 0, 0, 0xea, 0x60, // interval_ms 60000
            0, 0, 0, 3, // retained_cuts 3
            0, 0, 0, 1, // topics: 1
            0x00, 0x06, b'o', b'r', b'd', b'e', b'r', b's', // "orders"
        ];
        // These 26 bytes also decode in the KFC-4 layout, as a group of no topic: the one
        // case where the two overlap, and why a KFC-4 group must name a topic.
        assert!(decode_group_value(&legacy_group).is_ok_and(|v| v.topics.is_empty()));
        let (record, layout) = decode_record(&group_key, Some(&legacy_group)).unwrap();
        assert_eq!(layout, Layout::Legacy);
        assert_eq!(
            record,
            StateRecord::Group {
                group: "g2".into(),
                value: Some(GroupValue {
                    topics: vec!["orders".into()],
                    interval_ms: Some(60_000),
                    retained_cuts: 3,
                    last_epoch: 0,
                }),
            }
        );
        let kfc4 = GroupValue {
            topics: vec!["orders".into()],
            interval_ms: None,
            retained_cuts: 3,
            last_epoch: 9,
        };
        let (record, layout) = decode_record(&group_key, Some(&encode_group_value(&kfc4))).unwrap();
        assert_eq!(layout, Layout::Kfc4);
        assert_eq!(
            record,
            StateRecord::Group {
                group: "g2".into(),
                value: Some(kfc4),
            }
        );

        let start_key = encode_key(&StateKey::injection_start("g2", 12));
        let legacy_start: Vec<u8> = vec![
            0x00, 0x00, // version 0
            0, 0, 0, 0, 0, 0, 0x03, 0xe8, // triggered_at 1000
            0, 0, 0, 2, // targets: 2
            0x00, 0x01, b'a', // topic "a"
            0, 0, 0, 2, // partitions: 2
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, // partition 0, start_offset 4
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 6, // partition 1, start_offset 6
            0x00, 0x02, b'b', b'b', // topic "bb"
            0, 0, 0, 0, // partitions: 0
        ];
        let (record, layout) = decode_record(&start_key, Some(&legacy_start)).unwrap();
        assert_eq!(layout, Layout::Legacy);
        assert_eq!(
            record,
            StateRecord::InjectionStart {
                group: "g2".into(),
                epoch: 12,
                value: Some(InjectionStart {
                    coordinator_epoch: 0,
                    triggered_at_ms: 1000,
                    targets: vec![("a".into(), 2), ("bb".into(), 0)],
                }),
            }
        );
        let kfc4 = InjectionStart {
            coordinator_epoch: 4,
            triggered_at_ms: 1_724_500_000_000,
            targets: vec![("orders".into(), 3)],
        };
        let (_, layout) = decode_record(&start_key, Some(&encode_injection_start(&kfc4))).unwrap();
        assert_eq!(layout, Layout::Kfc4);
        // Bytes neither layout reads: the KFC-4 decoder's error.
        let e = decode_record(&start_key, Some(&[0, 0, 1])).unwrap_err();
        assert_eq!(e.what, "injection-start value");
        // Tombstones and cuts are KFC-4's.
        assert_eq!(decode_record(&group_key, None).unwrap().1, Layout::Kfc4);
    }
}
