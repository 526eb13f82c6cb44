#!/usr/bin/env python3
"""kafka-python (pure Python client) end-to-end suite against a ringlog broker (issue #4).

usage: kafka_python_suite.py BOOTSTRAP [MESSAGES]

Admin create with configs, INVALID_CONFIG for an unknown config, MESSAGES (default 100,000)
idempotent acks=all messages split over every compression codec with explicit timestamps,
consume everything back with assign() from offset 0 (content and per-partition order),
ListOffsets earliest/latest/by-timestamp, DescribeConfigs, CreatePartitions to 8 plus a produce
to a new partition, DeleteTopics.

Prints a JSON summary on success; exits 1 with "FAIL: step: detail" on stderr otherwise.
"""
import json
import logging
import sys
import time
import uuid

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka import errors as Errors

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 6
from suite import SUMMARY, fail, step, check, expect, fail_on_soft
SUMMARY.update({"client": "kafka-python", "version": kafka.__version__})


def guard(what, fn, *a, **kw):
    try:
        return fn(*a, **kw)
    except Exception as e:
        fail(f"{what}: {type(e).__name__}: {e}")


def value_of(codec, i):
    return f"{codec}-{i}-".encode() + bytes((i * 31 + j) % 256 for j in range(i % 64))


def partition_count(admin, topic):
    for t in admin.describe_topics([topic]):
        if t.get("name", t.get("topic")) == topic and not t.get("error_code"):
            return len(t["partitions"])
    return None


def wait_partitions(admin, topic, want, timeout=20.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = guard("describe_topics", partition_count, admin, topic)
        if last == want:
            return
        time.sleep(0.2)
    fail(f"metadata shows {last} partitions for {topic!r} after {timeout}s, want {want}")


def main():
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    bootstrap = sys.argv[1]
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    topic = f"kp-suite-{uuid.uuid4().hex[:8]}"
    common = {"bootstrap_servers": bootstrap, "request_timeout_ms": 30_000}

    step("ApiVersions+Metadata")
    admin = guard("KafkaAdminClient()", KafkaAdminClient, **common)
    cluster = guard("describe_cluster", admin.describe_cluster)
    brokers = cluster.get("brokers", [])
    # One broker per bootstrap address (a single node, or every node of a cluster), ids 1..n.
    want = bootstrap.split(",")
    check(len(brokers) == len(want), f"want {len(want)} brokers, got {brokers}")
    ids = sorted(b.get("node_id", b.get("broker_id")) for b in brokers)
    check(ids == list(range(1, len(want) + 1)), f"node ids {ids}")
    listed = sorted(f"{b['host']}:{b['port']}" for b in brokers)
    check(listed == sorted(want), f"advertised {listed}, want {want}")

    step("CreateTopics with configs")
    configs = {"retention.ms": "86400000", "segment.bytes": "1048576"}
    guard(f"create_topics {topic} {configs}", admin.create_topics,
          {topic: {"num_partitions": PARTITIONS, "replication_factor": 1, "configs": configs}})
    wait_partitions(admin, topic, PARTITIONS)

    step("CreateTopics unknown config -> INVALID_CONFIG")
    bad = topic + "-bad"
    try:
        admin.create_topics({bad: {"num_partitions": 1, "replication_factor": 1,
                                   "configs": {"no.such.config": "1"}}})
        fail("topic with config no.such.config was created")
    except Errors.InvalidConfigurationError:
        pass
    except Exception as e:
        fail(f"want InvalidConfigurationError (40), got {type(e).__name__}: {e}")
    check(bad not in guard("list_topics", admin.list_topics), f"refused topic {bad!r} exists")

    step("Produce idempotent acks=all, all codecs")
    t0 = int(time.time() * 1000) - total - 60_000
    delivered = {}
    per = total // len(CODECS)
    codec_of = {}
    t_start = time.time()
    for ci, codec in enumerate(CODECS):
        p = guard(f"KafkaProducer(compression_type={codec})", KafkaProducer,
                  acks="all", enable_idempotence=True, compression_type=codec,
                  linger_ms=5, batch_size=256 * 1024, max_request_size=4 * 1024 * 1024,
                  delivery_timeout_ms=120_000, **common)
        hi = total if ci == len(CODECS) - 1 else (ci + 1) * per
        futs = []
        for i in range(ci * per, hi):
            codec_of[i] = codec
            futs.append((i, p.send(topic, key=f"k-{i % 1000}".encode(),
                                   value=value_of(codec, i), timestamp_ms=t0 + i)))
        guard(f"flush ({codec})", p.flush, timeout=120)
        for i, f in futs:
            md = guard(f"delivery of message {i} ({codec})", f.get, timeout=60)
            delivered[i] = (md.partition, md.offset)
        p.close(timeout=10)
    check(len(delivered) == total, f"{len(delivered)} of {total} delivered")
    SUMMARY["produce_seconds"] = round(time.time() - t_start, 2)

    by_part = {p: [] for p in range(PARTITIONS)}
    for i in sorted(delivered):
        part, off = delivered[i]
        by_part[part].append((off, i))
    for part, lst in by_part.items():
        offs = [o for o, _ in lst]
        check(offs == list(range(len(offs))),
              f"partition {part}: acknowledged offsets are not 0..{len(offs) - 1} in produce order")
    counts = {p: len(lst) for p, lst in by_part.items()}
    SUMMARY["per_partition"] = counts

    step("Consume assign() from 0, all partitions")
    c = guard("KafkaConsumer()", KafkaConsumer, group_id=None, enable_auto_commit=False,
              auto_offset_reset="none", fetch_max_wait_ms=200, **common)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    got = {p: [] for p in range(PARTITIONS)}
    deadline = time.time() + 180
    while sum(map(len, got.values())) < total:
        if time.time() > deadline:
            fail(f"consumed {sum(map(len, got.values()))} of {total} in 180 s")
        recs = guard("poll", c.poll, timeout_ms=1000, max_records=10_000)
        for tp, msgs in recs.items():
            for m in msgs:
                got[tp.partition].append((m.offset, m.key, m.value, m.timestamp))
    for part in range(PARTITIONS):
        want, have = by_part[part], got[part]
        check(len(have) == len(want), f"partition {part}: read {len(have)}, want {len(want)}")
        for (off, i), (hoff, hkey, hval, ts) in zip(want, have):
            check(hoff == off, f"partition {part}: offset {hoff}, want {off}")
            check(hkey == f"k-{i % 1000}".encode(), f"p{part}@{off}: key {hkey!r}")
            check(hval == value_of(codec_of[i], i), f"p{part}@{off}: value {hval[:40]!r}...")
            check(ts == t0 + i, f"p{part}@{off}: timestamp {ts}, want {t0 + i}")

    step("ListOffsets earliest/latest")
    begin = guard("beginning_offsets", c.beginning_offsets, tps)
    end = guard("end_offsets", c.end_offsets, tps)
    for tp in tps:
        check(begin[tp] == 0, f"beginning_offsets p{tp.partition} = {begin[tp]}")
        check(end[tp] == counts[tp.partition],
              f"end_offsets p{tp.partition} = {end[tp]}, want {counts[tp.partition]}")

    step("ListOffsets by timestamp")
    for target_i in (0, total // 10 + 7, total // 3, total - 1, total + 10_000):
        res = guard("offsets_for_times", c.offsets_for_times, {tp: t0 + target_i for tp in tps})
        for tp in tps:
            want = next((o for o, i in by_part[tp.partition] if i >= target_i), None)
            r = res.get(tp)
            have = None if r is None else r.offset
            expect(have == want, f"ts t0+{target_i} p{tp.partition}: {r}, want offset {want}")
    c.close()

    step("DescribeConfigs")
    res = guard("describe_configs", admin.describe_configs,
                [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    described = res.get("topic", {}).get(topic)
    check(described is not None, f"no topic entry in {res}")
    for k, v in configs.items():
        entry = described.get(k)
        check(entry is not None, f"{k} missing from DescribeConfigs: {sorted(described)}")
        have = entry.get("value", entry.get("config_value")) if isinstance(entry, dict) else entry
        check(have == v, f"{k} = {have!r}, want {v!r}")

    step("CreatePartitions to 8")
    guard("create_partitions 8", admin.create_partitions, {topic: 8})
    wait_partitions(admin, topic, 8)
    p = KafkaProducer(acks="all", enable_idempotence=True, metadata_max_age_ms=500, **common)
    md = guard("send to partition 7", lambda: p.send(topic, value=b"on-new-partition",
                                                     partition=7).get(timeout=30))
    check(md.partition == 7 and md.offset == 0, f"send to partition 7: {md}")
    p.close(timeout=10)
    c = KafkaConsumer(group_id=None, enable_auto_commit=False, **common)
    tp7 = TopicPartition(topic, 7)
    c.assign([tp7])
    c.seek(tp7, 0)
    vals = []
    deadline = time.time() + 30
    while not vals and time.time() < deadline:
        for _, msgs in guard("poll p7", c.poll, timeout_ms=1000).items():
            vals += [m.value for m in msgs]
    check(vals == [b"on-new-partition"], f"read back partition 7: {vals}")
    c.close()

    step("acks=0 and acks=1")
    small = topic + "-acks"
    guard(f"create_topics {small}", admin.create_topics,
          {small: {"num_partitions": 1, "replication_factor": 1}})
    wait_partitions(admin, small, 1)
    for acks in (0, 1):
        p = KafkaProducer(acks=acks, linger_ms=5, **common)
        futs = [p.send(small, value=f"acks{acks}-{i}".encode(), partition=0) for i in range(1000)]
        guard(f"flush acks={acks}", p.flush, timeout=30)
        for f in futs:
            guard(f"send acks={acks}", f.get, timeout=30)
        p.close(timeout=10)
    c = KafkaConsumer(group_id=None, enable_auto_commit=False, fetch_max_wait_ms=200, **common)
    tp = TopicPartition(small, 0)
    c.assign([tp])
    deadline = time.time() + 20
    while guard("end_offsets", c.end_offsets, [tp])[tp] < 2000 and time.time() < deadline:
        time.sleep(0.2)
    c.seek(tp, 0)
    vals = []
    while len(vals) < 2000 and time.time() < deadline + 20:
        for _, msgs in guard("poll", c.poll, timeout_ms=1000).items():
            vals += [m.value.decode() for m in msgs]
    c.close()
    want = [f"acks0-{i}" for i in range(1000)] + [f"acks1-{i}" for i in range(1000)]
    expect(vals == want, f"acks=0/1: read back {len(vals)} values, want 2000 in order")
    guard(f"delete_topics {small}", admin.delete_topics, [small])

    step("DeleteTopics")
    guard(f"delete_topics {topic}", admin.delete_topics, [topic])
    deadline = time.time() + 20
    while topic in guard("list_topics", admin.list_topics):
        check(time.time() < deadline, f"{topic} still listed 20 s after DeleteTopics")
        time.sleep(0.2)
    admin.close()

    SUMMARY["messages"] = total
    fail_on_soft()
    SUMMARY["ok"] = True
    print(json.dumps(SUMMARY))


if __name__ == "__main__":
    main()
