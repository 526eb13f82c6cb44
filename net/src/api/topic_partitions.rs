//! DescribeTopicPartitions (v0, KIP-966's describe: what `kafka-topics --describe` and the
//! admin client's `describeTopics` use), as Kafka's `DescribeTopicPartitionsRequestHandler` and
//! `KRaftMetadataCache.describeTopicResponse` answer it: the topics named (every topic when
//! none is), in name order from the request's cursor on, each with its partitions as Metadata
//! describes them and empty eligible leader replicas (ringlog has no ELR), at most
//! `response_partition_limit` partitions in one answer; `next_cursor` says where the next
//! answer starts. A topic the principal may not describe is refused by name, after the others,
//! and hidden from a list of all; the rest carry their authorized operations (KIP-430).

use kafka_protocol::messages::describe_topic_partitions_request::Cursor as RequestCursor;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use uuid::Uuid;

use super::authz::TopicAccess;
use super::metadata::partition_view;
use super::str_bytes;
use crate::acl::{self, Subject};
use crate::codes;
use crate::core::{is_internal_topic, CoreState};

/// The most partitions one answer lists, whatever the request's `response_partition_limit`
/// asks: Kafka's `max.request.partition.size.limit` default.
pub const MAX_PARTITIONS_PER_RESPONSE: usize = 2_000;

/// The most topics named in a request one answer looks at (in name order, from the cursor
/// on): past it the answer ends with a cursor at the first one left, as when its partitions
/// run out, and the rest come in the next answer. Kafka has no such bound; it keeps the work
/// of an answer (each topic's lookup and ACL checks, and the unknown and refused topics it
/// lists) independent of how many topics a request names.
pub const MAX_TOPICS_PER_RESPONSE: usize = 10_000;

/// DescribeTopicPartitions for `who`, from this core's metadata copy.
pub fn describe(
    state: &CoreState,
    who: &Subject,
    req: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let m = state.meta.borrow();
    let broker = Broker {
        state,
        m: &m,
        access: TopicAccess::new(state, who, ApiKey::DescribeTopicPartitions),
    };
    answer(req, &broker)
}

/// What an answer needs of the broker (apart so that the paging is tested without one).
trait Topics {
    /// The names of every topic from `from` on, in order.
    fn names_from<'s>(&'s self, from: &'s str) -> Box<dyn Iterator<Item = &'s str> + 's>;
    /// The partition count and id of `topic`, if it exists.
    fn topic(&self, topic: &str) -> Option<(u32, Uuid)>;
    /// Partition `partition` of `topic` (which exists).
    fn partition(&self, topic: &str, partition: u32) -> DescribeTopicPartitionsResponsePartition;
    /// Whether the principal may describe `topic`.
    fn may_describe(&self, topic: &str) -> bool;
    /// The operations the principal may do on `topic` (KIP-430's bit field).
    fn operations(&self, topic: &str) -> i32;
}

struct Broker<'a> {
    state: &'a CoreState,
    m: &'a meta::MetaState,
    access: TopicAccess<'a>,
}

impl Topics for Broker<'_> {
    fn names_from<'s>(&'s self, from: &'s str) -> Box<dyn Iterator<Item = &'s str> + 's> {
        use std::ops::Bound;
        let range = (Bound::Included(from), Bound::Unbounded);
        Box::new(
            self.m
                .topics
                .range::<str, _>(range)
                .map(|(n, _)| n.as_str()),
        )
    }

    fn topic(&self, topic: &str) -> Option<(u32, Uuid)> {
        let t = self.m.topic(topic)?;
        Some((t.partitions, Uuid::from_bytes(t.topic_id)))
    }

    fn partition(&self, topic: &str, partition: u32) -> DescribeTopicPartitionsResponsePartition {
        let v = partition_view(self.state, self.m, topic, partition);
        // A partition without a leader has no error here (Kafka's answer), unlike Metadata's
        // LEADER_NOT_AVAILABLE.
        DescribeTopicPartitionsResponsePartition::default()
            .with_partition_index(partition as i32)
            .with_leader_id(BrokerId(v.leader.unwrap_or(-1)))
            .with_leader_epoch(v.leader_epoch)
            .with_replica_nodes(v.replicas)
            .with_isr_nodes(v.isr)
            .with_eligible_leader_replicas(Some(Vec::new()))
            .with_last_known_elr(Some(Vec::new()))
            .with_offline_replicas(v.offline)
    }

    fn may_describe(&self, topic: &str) -> bool {
        self.access.allows(topic)
    }

    fn operations(&self, topic: &str) -> i32 {
        self.access.operations(topic)
    }
}

/// The answer to `req` from what `topics` holds.
fn answer(
    req: &DescribeTopicPartitionsRequest,
    topics: &impl Topics,
) -> DescribeTopicPartitionsResponse {
    let cursor = req.cursor.as_ref();
    let from = cursor.map_or("", |c| c.topic_name.as_str());
    let named = !req.topics.is_empty();
    if let Some(c) = cursor {
        // The cursor's topic must be one of those named, and its partition a partition index.
        let listed = !named || req.topics.iter().any(|t| t.name.as_str() == from);
        if !listed || c.partition_index < 0 {
            return refused_whole(req, codes::INVALID_REQUEST);
        }
    }
    let limit = req
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE as i32) as usize;
    if !named {
        // Every topic the principal may describe; the others are not shown.
        let names = topics.names_from(from).filter(|n| topics.may_describe(n));
        let mut resp = page(names, topics, cursor, limit, false);
        add_operations(&mut resp, topics);
        return resp;
    }
    let mut names: Vec<&str> = req
        .topics
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| *n >= from)
        .collect();
    names.sort_unstable();
    names.dedup();
    let later = names.split_off(names.len().min(MAX_TOPICS_PER_RESPONSE));
    let (allowed, refused): (Vec<&str>, Vec<&str>) =
        names.into_iter().partition(|n| topics.may_describe(n));
    let mut resp = page(allowed.into_iter(), topics, cursor, limit, true);
    if resp.next_cursor.is_none() {
        resp.next_cursor = later.first().map(|n| cursor_at(n, 0));
    }
    add_operations(&mut resp, topics);
    // The refused topics, after the others and whatever the page's limit, with neither id
    // nor partitions.
    resp.topics.extend(refused.into_iter().map(|n| {
        DescribeTopicPartitionsResponseTopic::default()
            .with_error_code(acl::TOPIC_AUTHORIZATION_FAILED)
            .with_name(Some(topic_name(n)))
    }));
    resp
}

/// The topics of `names` (in order, each allowed) from the cursor's partition of its topic
/// on, as many partitions as `limit` lets in; the cursor of the first partition left out.
/// `named`: a name that is no topic is answered as unknown (else it is skipped).
fn page<'n>(
    names: impl Iterator<Item = &'n str>,
    topics: &impl Topics,
    cursor: Option<&RequestCursor>,
    limit: usize,
    named: bool,
) -> DescribeTopicPartitionsResponse {
    let mut resp = DescribeTopicPartitionsResponse::default();
    let mut room = limit as u64;
    for name in names {
        if room == 0 {
            // The limit was reached at the end of the previous topic.
            resp.next_cursor = Some(cursor_at(name, 0));
            break;
        }
        let Some((count, id)) = topics.topic(name) else {
            if named {
                resp.topics.push(unknown(name));
            }
            continue;
        };
        let first = match cursor {
            Some(c) if c.topic_name.as_str() == name => c.partition_index.max(0) as u64,
            _ => 0,
        };
        let count = u64::from(count);
        let end = count.min(first + room);
        let partitions = (first..end)
            .map(|p| topics.partition(name, p as u32))
            .collect();
        resp.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(name)))
                .with_topic_id(id)
                .with_is_internal(is_internal_topic(name))
                .with_partitions(partitions),
        );
        if end < count {
            resp.next_cursor = Some(cursor_at(name, end as i32));
            break;
        }
        room -= end.saturating_sub(first);
    }
    resp
}

/// A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION
/// for a name no topic can have.
fn unknown(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let code = match meta::state::validate_topic_name(name) {
        Ok(()) => codes::UNKNOWN_TOPIC_OR_PARTITION,
        Err(_) => codes::INVALID_TOPIC_EXCEPTION,
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code)
        .with_name(Some(topic_name(name)))
        .with_is_internal(is_internal_topic(name))
}

/// Every topic answered so far (those found and the unknown ones) with its operations.
fn add_operations(resp: &mut DescribeTopicPartitionsResponse, topics: &impl Topics) {
    for t in &mut resp.topics {
        if let Some(name) = &t.name {
            t.topic_authorized_operations = topics.operations(name);
        }
    }
}

/// The answer to a request refused whole (Kafka's `getErrorResponse`): each topic named, in
/// the request's order, with `code` and nothing else.
fn refused_whole(
    req: &DescribeTopicPartitionsRequest,
    code: i16,
) -> DescribeTopicPartitionsResponse {
    DescribeTopicPartitionsResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(code)
                    .with_name(Some(t.name.clone()))
            })
            .collect(),
    )
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}

fn topic_name(name: &str) -> TopicName {
    TopicName(str_bytes(name))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;

    use super::*;

    /// The operations the fake lets on a topic it shows.
    const OPERATIONS: i32 = 0b111_1111_1000;

    /// Topics (name, partition count) and the ones the principal may not describe.
    struct Fake {
        topics: BTreeMap<String, u32>,
        denied: Vec<&'static str>,
    }

    fn fake(topics: &[(&str, u32)]) -> Fake {
        Fake {
            topics: topics.iter().map(|&(n, c)| (n.to_string(), c)).collect(),
            denied: Vec::new(),
        }
    }

    impl Topics for Fake {
        fn names_from<'s>(&'s self, from: &'s str) -> Box<dyn Iterator<Item = &'s str> + 's> {
            use std::ops::Bound;
            let range = (Bound::Included(from), Bound::Unbounded);
            Box::new(self.topics.range::<str, _>(range).map(|(n, _)| n.as_str()))
        }

        fn topic(&self, topic: &str) -> Option<(u32, Uuid)> {
            let &count = self.topics.get(topic)?;
            Some((count, Uuid::from_u128(u128::from(count) + 1)))
        }

        fn partition(&self, _: &str, partition: u32) -> DescribeTopicPartitionsResponsePartition {
            DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(partition as i32)
                .with_leader_id(BrokerId(1))
        }

        fn may_describe(&self, topic: &str) -> bool {
            !self.denied.contains(&topic)
        }

        fn operations(&self, _: &str) -> i32 {
            OPERATIONS
        }
    }

    fn request(
        names: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|n| TopicRequest::default().with_name(topic_name(n)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                RequestCursor::default()
                    .with_topic_name(topic_name(t))
                    .with_partition_index(p)
            }))
    }

    /// Each topic answered: its name, error code and partition indexes.
    fn listed(r: &DescribeTopicPartitionsResponse) -> Vec<(String, i16, Vec<i32>)> {
        r.topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
                let parts = t.partitions.iter().map(|p| p.partition_index).collect();
                (name, t.error_code, parts)
            })
            .collect()
    }

    fn next(r: &DescribeTopicPartitionsResponse) -> Option<(String, i32)> {
        r.next_cursor
            .as_ref()
            .map(|c| (c.topic_name.to_string(), c.partition_index))
    }

    fn topic(name: &str, code: i16, parts: &[i32]) -> (String, i16, Vec<i32>) {
        (name.to_string(), code, parts.to_vec())
    }

    #[test]
    fn every_topic_in_name_order_when_none_is_named() {
        let topics = fake(&[("b", 2), ("a", 1), ("__consumer_offsets", 1)]);
        let r = answer(&request(&[], 100, None), &topics);
        assert_eq!(
            listed(&r),
            vec![
                topic("__consumer_offsets", 0, &[0]),
                topic("a", 0, &[0]),
                topic("b", 0, &[0, 1]),
            ]
        );
        assert_eq!(next(&r), None);
        let internal: Vec<bool> = r.topics.iter().map(|t| t.is_internal).collect();
        assert_eq!(internal, [true, false, false]);
        assert_eq!(r.topics[2].topic_id, Uuid::from_u128(3));
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            assert_eq!(p.leader_id, BrokerId(1));
        }
    }

    #[test]
    fn named_topics_come_once_in_name_order_and_unknown_ones_take_no_room() {
        let topics = fake(&[("a", 1), ("c", 2)]);
        let names = ["c", "a", "nope", "c", "bad name!"];
        // Room for one more partition than a and c have: the unknown ones come too.
        let r = answer(&request(&names, 4, None), &topics);
        assert_eq!(
            listed(&r),
            vec![
                topic("a", 0, &[0]),
                topic("bad name!", codes::INVALID_TOPIC_EXCEPTION, &[]),
                topic("c", 0, &[0, 1]),
                topic("nope", codes::UNKNOWN_TOPIC_OR_PARTITION, &[]),
            ]
        );
        assert_eq!(next(&r), None);
        // Found and unknown topics alike carry their operations; an unknown one has no id.
        assert!(r
            .topics
            .iter()
            .all(|t| t.topic_authorized_operations == OPERATIONS));
        assert_eq!(r.topics[3].topic_id, Uuid::nil());
        // Room for exactly those: the answer ends before the next name, known or not.
        let r = answer(&request(&names, 3, None), &topics);
        assert_eq!(r.topics.len(), 3);
        assert_eq!(next(&r), Some(("nope".into(), 0)));
    }

    /// Every (topic, partition) of the answers that follow one another's cursor, as a client
    /// that sends the same request with the last cursor gets them; each answer is checked to
    /// list at most `limit` partitions, and exactly `limit` unless it is the last.
    fn follow(topics: &Fake, names: &[&str], limit: i32) -> Vec<(String, i32)> {
        let mut got = Vec::new();
        let mut cursor: Option<(String, i32)> = None;
        for _ in 0..1_000 {
            let at = cursor.as_ref().map(|(t, p)| (t.as_str(), *p));
            let r = answer(&request(names, limit, at), topics);
            let parts: Vec<(String, i32)> = r
                .topics
                .iter()
                .flat_map(|t| {
                    let name = t.name.as_ref().unwrap().to_string();
                    t.partitions
                        .iter()
                        .map(move |p| (name.clone(), p.partition_index))
                })
                .collect();
            cursor = next(&r);
            if cursor.is_some() {
                assert_eq!(
                    parts.len(),
                    limit as usize,
                    "{names:?} limit {limit}: {r:?}"
                );
            } else {
                assert!(
                    parts.len() <= limit as usize,
                    "{names:?} limit {limit}: {r:?}"
                );
            }
            got.extend(parts);
            if cursor.is_none() {
                return got;
            }
        }
        panic!("{names:?} limit {limit}: no last answer");
    }

    #[test]
    fn following_the_cursor_gives_every_partition_once_in_order() {
        let topics = fake(&[("a", 3), ("b", 1), ("c", 4), ("d", 2)]);
        let every: Vec<(String, i32)> = topics
            .topics
            .iter()
            .flat_map(|(n, &c)| (0..c as i32).map(move |p| (n.clone(), p)))
            .collect();
        for limit in 1..=11 {
            assert_eq!(
                follow(&topics, &[], limit),
                every,
                "every topic, limit {limit}"
            );
            let named = ["d", "c", "b", "a", "x"];
            assert_eq!(
                follow(&topics, &named, limit),
                every,
                "named, limit {limit}"
            );
        }
    }

    #[test]
    fn a_page_that_ends_with_a_topic_points_at_the_next_one() {
        let topics = fake(&[("a", 2), ("b", 2)]);
        let r = answer(&request(&["a", "b"], 2, None), &topics);
        assert_eq!(listed(&r), vec![topic("a", 0, &[0, 1])]);
        assert_eq!(next(&r), Some(("b".into(), 0)));
        // Even at an unknown topic: where the next answer starts, not that it exists.
        let r = answer(&request(&["a", "nope"], 2, None), &topics);
        assert_eq!(listed(&r), vec![topic("a", 0, &[0, 1])]);
        assert_eq!(next(&r), Some(("nope".into(), 0)));
        // The last topic's end: no cursor.
        let r = answer(&request(&["a", "b"], 4, None), &topics);
        assert_eq!(next(&r), None);
        // Mid-topic: the cursor names the first partition left.
        let r = answer(&request(&[], 3, None), &topics);
        assert_eq!(
            listed(&r),
            vec![topic("a", 0, &[0, 1]), topic("b", 0, &[0])]
        );
        assert_eq!(next(&r), Some(("b".into(), 1)));
        let r = answer(&request(&[], 3, Some(("b", 1))), &topics);
        assert_eq!(listed(&r), vec![topic("b", 0, &[1])]);
        assert_eq!(next(&r), None);
    }

    #[test]
    fn the_partition_limit_is_at_least_one_and_at_most_the_brokers() {
        let big = MAX_PARTITIONS_PER_RESPONSE as u32 * 2 + 1;
        let topics = fake(&[("big", big)]);
        for limit in [0, -5, 1] {
            let r = answer(&request(&["big"], limit, None), &topics);
            assert_eq!(listed(&r), vec![topic("big", 0, &[0])], "limit {limit}");
            assert_eq!(next(&r), Some(("big".into(), 1)));
        }
        let r = answer(&request(&[], i32::MAX, Some(("big", 1))), &topics);
        assert_eq!(r.topics[0].partitions.len(), MAX_PARTITIONS_PER_RESPONSE);
        let end = 1 + MAX_PARTITIONS_PER_RESPONSE as i32;
        assert_eq!(next(&r), Some(("big".into(), end)));
    }

    #[test]
    fn a_cursor_past_a_topics_partitions_lists_none_of_them() {
        let topics = fake(&[("a", 2), ("b", 1)]);
        let r = answer(&request(&["a", "b"], 10, Some(("a", 9))), &topics);
        assert_eq!(listed(&r), vec![topic("a", 0, &[]), topic("b", 0, &[0])]);
        assert_eq!(next(&r), None);
    }

    #[test]
    fn a_bad_cursor_refuses_every_topic_named() {
        let topics = fake(&[("a", 2), ("b", 1)]);
        let refused = vec![
            topic("b", codes::INVALID_REQUEST, &[]),
            topic("a", codes::INVALID_REQUEST, &[]),
            topic("b", codes::INVALID_REQUEST, &[]),
        ];
        // A negative partition, or a topic that is not named.
        for cursor in [("a", -1), ("c", 0)] {
            let r = answer(&request(&["b", "a", "b"], 10, Some(cursor)), &topics);
            assert_eq!(listed(&r), refused, "cursor {cursor:?}");
            assert_eq!(next(&r), None);
        }
        // With no topic named, nothing is.
        let r = answer(&request(&[], 10, Some(("a", -1))), &topics);
        assert!(r.topics.is_empty() && r.next_cursor.is_none(), "{r:?}");
        // Any topic at all goes when none is named.
        let r = answer(&request(&[], 10, Some(("aa", 0))), &topics);
        assert_eq!(listed(&r), vec![topic("b", 0, &[0])]);
    }

    #[test]
    fn refused_topics_come_last_by_name_and_are_hidden_from_a_list_of_all() {
        let mut topics = fake(&[("a", 2), ("s", 5), ("t", 1)]);
        topics.denied = vec!["s"];
        // Named: refused after the page, whatever its limit, with no id, partitions or
        // operations.
        let r = answer(&request(&["t", "s", "a"], 1, None), &topics);
        assert_eq!(
            listed(&r),
            vec![
                topic("a", 0, &[0]),
                topic("s", acl::TOPIC_AUTHORIZATION_FAILED, &[]),
            ]
        );
        assert_eq!(next(&r), Some(("a".into(), 1)));
        let s = &r.topics[1];
        assert_eq!(s.topic_id, Uuid::nil());
        assert_eq!(s.topic_authorized_operations, i32::MIN);
        assert!(!s.is_internal);
        // Those before the cursor are not answered again.
        let r = answer(&request(&["t", "s", "a"], 10, Some(("t", 0))), &topics);
        assert_eq!(listed(&r), vec![topic("t", 0, &[0])]);
        // All: not shown, and its partitions take no room.
        let r = answer(&request(&[], 3, None), &topics);
        assert_eq!(
            listed(&r),
            vec![topic("a", 0, &[0, 1]), topic("t", 0, &[0])]
        );
        assert_eq!(next(&r), None);
    }

    #[test]
    fn past_the_topic_bound_the_rest_come_in_the_next_answer() {
        let topics = fake(&[]);
        let names: Vec<String> = (0..MAX_TOPICS_PER_RESPONSE + 5)
            .map(|i| format!("t{i:06}"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let r = answer(&request(&names, 10, None), &topics);
        assert_eq!(r.topics.len(), MAX_TOPICS_PER_RESPONSE);
        let first_left = names[MAX_TOPICS_PER_RESPONSE];
        assert_eq!(next(&r), Some((first_left.to_string(), 0)));
        let r = answer(&request(&names, 10, Some((first_left, 0))), &topics);
        assert_eq!(r.topics.len(), 5);
        assert_eq!(next(&r), None);
        // The Java admin client sends the names not yet answered, without a cursor.
        let r = answer(
            &request(&names[MAX_TOPICS_PER_RESPONSE..], 10, None),
            &topics,
        );
        assert_eq!(r.topics.len(), 5);
        assert!(r
            .topics
            .iter()
            .all(|t| t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION));
    }
}
