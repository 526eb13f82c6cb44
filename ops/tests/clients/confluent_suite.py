#!/usr/bin/env python3
"""confluent-kafka (librdkafka) end-to-end suite against a ringlog broker (issue #4).

usage: confluent_suite.py BOOTSTRAP [MESSAGES]

Admin create with configs, INVALID_CONFIG for an unknown config, MESSAGES (default 100,000)
idempotent acks=all messages split over every compression codec with explicit timestamps,
consume everything back with assign() from offset 0 (content and per-partition order),
ListOffsets earliest/latest/by-timestamp, DescribeConfigs, IncrementalAlterConfigs,
CreatePartitions to 8 plus a produce to a new partition, DeleteTopics.

Prints a JSON summary on success; exits 1 with "FAIL: step: detail" on stderr otherwise.
"""
import json
import sys
import time
import uuid

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition, OFFSET_END)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, NewPartitions, NewTopic, OffsetSpec,
                                   ResourceType)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 6
from suite import SUMMARY, fail, step, check, expect, fail_on_soft
SUMMARY.update({"client": "confluent-kafka"})


def result(fut, what, timeout=30):
    try:
        return fut.result(timeout=timeout)
    except KafkaException as e:
        fail(f"{what}: {e.args[0]}")
    except Exception as e:  # timeouts, etc.
        fail(f"{what}: {type(e).__name__}: {e}")


def wait_partitions(admin, topic, want, timeout=20.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        t = admin.list_topics(timeout=10).topics.get(topic)
        if t is not None and t.error is None:
            last = len(t.partitions)
            if last == want:
                return
        time.sleep(0.1)
    fail(f"metadata shows {last} partitions for {topic!r} after {timeout}s, want {want}")


def value_of(codec, i):
    return f"{codec}-{i}-".encode() + bytes((i * 31 + j) % 256 for j in range(i % 64))


def main():
    bootstrap = sys.argv[1]
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    topic = f"cf-suite-{uuid.uuid4().hex[:8]}"
    errors_seen = []
    common = {"bootstrap.servers": bootstrap,
              "error_cb": lambda e: errors_seen.append(str(e))}
    admin = AdminClient(dict(common))

    step("ApiVersions+Metadata")
    md = admin.list_topics(timeout=10)
    # One broker per bootstrap address (a single node, or every node of a cluster), ids 1..n.
    want = bootstrap.split(",")
    check(len(md.brokers) == len(want), f"want {len(want)} brokers, got {md.brokers}")
    check(sorted(md.brokers) == list(range(1, len(want) + 1)), f"node ids {sorted(md.brokers)}")
    listed = sorted(f"{b.host}:{b.port}" for b in md.brokers.values())
    check(listed == sorted(want), f"advertised {listed}, want {want}")

    step("CreateTopics with configs")
    configs = {"retention.ms": "86400000", "segment.bytes": "1048576"}
    fs = admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=configs)],
                             operation_timeout=10, request_timeout=30)
    result(fs[topic], f"create {topic} {configs}")
    wait_partitions(admin, topic, PARTITIONS)

    step("CreateTopics existing topic -> TOPIC_ALREADY_EXISTS")
    fs = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], request_timeout=30)
    try:
        fs[topic].result(timeout=30)
        fail("second CreateTopics of the same name succeeded")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS,
              f"want TOPIC_ALREADY_EXISTS, got {e.args[0]}")

    step("CreateTopics unknown config -> INVALID_CONFIG")
    bad = topic + "-bad"
    fs = admin.create_topics([NewTopic(bad, 1, 1, config={"no.such.config": "1"})],
                             request_timeout=30)
    try:
        fs[bad].result(timeout=30)
        fail("topic with config no.such.config was created")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.INVALID_CONFIG,
              f"want INVALID_CONFIG, got {e.args[0]}")
    check(bad not in admin.list_topics(timeout=10).topics, f"refused topic {bad!r} exists")

    step("Produce idempotent acks=all, all codecs")
    t0 = int(time.time() * 1000) - total - 60_000  # record timestamps t0 + i, all in the past
    delivered = {}  # i -> (partition, offset)
    failures = []
    per = total // len(CODECS)
    produced = 0
    t_start = time.time()
    for ci, codec in enumerate(CODECS):
        p = Producer(dict(common, **{
            "acks": "all", "enable.idempotence": True, "compression.type": codec,
            "linger.ms": 5, "batch.size": 1_000_000, "message.timeout.ms": 60_000,
            "queue.buffering.max.messages": 1_000_000,
        }))
        hi = total if ci == len(CODECS) - 1 else (ci + 1) * per


        for i in range(ci * per, hi):
            def on_delivery(err, msg, i=i):
                if err is not None:
                    failures.append((i, str(err)))
                else:
                    delivered[i] = (msg.partition(), msg.offset())
            while True:
                try:
                    p.produce(topic, key=f"k-{i % 1000}".encode(), value=value_of(codec, i),
                              timestamp=t0 + i, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.05)
            produced += 1
            if i % 1000 == 0:
                p.poll(0)
        left = p.flush(60)
        check(left == 0, f"codec {codec}: {left} messages not delivered after flush(60)")
        check(not failures, f"codec {codec}: delivery failures, first: {failures[:3]}")
    check(len(delivered) == total, f"{len(delivered)} of {total} delivered")
    SUMMARY["produce_seconds"] = round(time.time() - t_start, 2)

    # Expected per-partition content: offsets must be 0..n-1 in the order of i.
    by_part = {p: [] for p in range(PARTITIONS)}
    for i in sorted(delivered):
        part, off = delivered[i]
        by_part[part].append((off, i))
    for part, lst in by_part.items():
        offs = [o for o, _ in lst]
        check(offs == list(range(len(offs))),
              f"partition {part}: acknowledged offsets not 0..{len(offs) - 1} in produce "
              f"order (first bad: {next((x for x in zip(offs, range(len(offs))) if x[0] != x[1]), None)})")
    counts = {p: len(lst) for p, lst in by_part.items()}
    SUMMARY["per_partition"] = counts

    step("Consume assign() from 0, all partitions")
    c = Consumer(dict(common, **{
        "group.id": "ringlog-e2e-unused", "enable.auto.commit": False,
        "enable.partition.eof": True, "auto.offset.reset": "error", "check.crcs": True,
    }))
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = {p: [] for p in range(PARTITIONS)}
    eof = set(p for p in range(PARTITIONS) if counts[p] == 0)
    deadline = time.time() + 120
    codec_of = {}
    for ci, codec in enumerate(CODECS):
        hi = total if ci == len(CODECS) - 1 else (ci + 1) * per
        for i in range(ci * per, hi):
            codec_of[i] = codec
    while len(eof) < PARTITIONS or sum(map(len, got.values())) < total:
        if time.time() > deadline:
            fail(f"consumed {sum(map(len, got.values()))} of {total} in 120 s, eof {sorted(eof)}")
        for m in c.consume(num_messages=10_000, timeout=1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if len(got[m.partition()]) >= counts[m.partition()]:
                        eof.add(m.partition())
                    continue
                fail(f"consume error: {m.error()}")
            got[m.partition()].append((m.offset(), m.key(), m.value(), m.timestamp()))
    c.close()
    for part in range(PARTITIONS):
        want = by_part[part]
        have = got[part]
        check(len(have) == len(want), f"partition {part}: read {len(have)}, want {len(want)}")
        for (off, i), (hoff, hkey, hval, (tstype, ts)) in zip(want, have):
            check(hoff == off, f"partition {part}: offset {hoff}, want {off}")
            check(hkey == f"k-{i % 1000}".encode(), f"p{part}@{off}: key {hkey!r}")
            check(hval == value_of(codec_of[i], i),
                  f"p{part}@{off}: value {hval[:40]!r}..., want {value_of(codec_of[i], i)[:40]!r}...")
            check(ts == t0 + i, f"p{part}@{off}: timestamp {ts} (type {tstype}), want {t0 + i}")

    step("ListOffsets earliest/latest (consumer watermarks)")
    c = Consumer(dict(common, **{"group.id": "ringlog-e2e-unused"}))
    for part in range(PARTITIONS):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        check((lo, hi) == (0, counts[part]),
              f"partition {part}: watermarks ({lo}, {hi}), want (0, {counts[part]})")

    step("ListOffsets by timestamp (offsets_for_times)")
    for target_i in (0, total // 10 + 7, total // 3, total - 1, total + 10_000):
        tps = [TopicPartition(topic, part, t0 + target_i) for part in range(PARTITIONS)]
        res = c.offsets_for_times(tps, timeout=10)
        for tp in res:
            check(tp.error is None, f"offsets_for_times p{tp.partition}: {tp.error}")
            want = next((o for o, i in by_part[tp.partition] if i >= target_i), None)
            want = OFFSET_END if want is None else want
            # A timestamp past the last record: Kafka answers offset -1 (librdkafka OFFSET_END).
            expect(tp.offset == want,
                  f"ts t0+{target_i} partition {tp.partition}: offset {tp.offset}, want {want}")
    c.close()

    step("ListOffsets via AdminClient.list_offsets")
    req = {TopicPartition(topic, p): OffsetSpec.earliest() for p in range(PARTITIONS)}
    for tp, fut in admin.list_offsets(req, request_timeout=30).items():
        r = result(fut, f"list_offsets earliest p{tp.partition}")
        check(r.offset == 0, f"earliest p{tp.partition}: {r.offset}")
    req = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    for tp, fut in admin.list_offsets(req, request_timeout=30).items():
        r = result(fut, f"list_offsets latest p{tp.partition}")
        check(r.offset == counts[tp.partition], f"latest p{tp.partition}: {r.offset}")
    mid = total // 2
    req = {TopicPartition(topic, p): OffsetSpec.for_timestamp(t0 + mid) for p in range(PARTITIONS)}
    for tp, fut in admin.list_offsets(req, request_timeout=30).items():
        r = result(fut, f"list_offsets for_timestamp p{tp.partition}")
        want = next((o for o, i in by_part[tp.partition] if i >= mid), -1)
        expect(r.offset == want, f"for_timestamp p{tp.partition}: {r.offset}, want {want}")

    step("DescribeConfigs")
    res = ConfigResource(ResourceType.TOPIC, topic)
    described = result(admin.describe_configs([res], request_timeout=30)[res], "describe_configs")
    for k, v in configs.items():
        check(k in described, f"{k} missing from DescribeConfigs: {sorted(described)}")
        check(described[k].value == v, f"{k} = {described[k].value!r}, want {v!r}")

    step("IncrementalAlterConfigs")
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "172800000", incremental_operation=AlterConfigOpType.SET)])
    result(admin.incremental_alter_configs([res], request_timeout=30)[res],
           "incremental_alter_configs retention.ms=172800000")
    res = ConfigResource(ResourceType.TOPIC, topic)
    described = result(admin.describe_configs([res], request_timeout=30)[res], "describe_configs")
    check(described["retention.ms"].value == "172800000",
          f"after alter: retention.ms = {described['retention.ms'].value!r}")
    check(described["segment.bytes"].value == "1048576",
          f"after alter: segment.bytes = {described['segment.bytes'].value!r}")
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([res], request_timeout=30)[res].result(timeout=30)
        fail("IncrementalAlterConfigs accepted no.such.config")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.INVALID_CONFIG,
              f"alter no.such.config: want INVALID_CONFIG, got {e.args[0]}")

    step("CreatePartitions to 8")
    fs = admin.create_partitions([NewPartitions(topic, 8)], request_timeout=30)
    result(fs[topic], "create_partitions 8")
    wait_partitions(admin, topic, 8)
    p = Producer(dict(common, **{"acks": "all", "enable.idempotence": True,
                                 "topic.metadata.refresh.interval.ms": 500}))
    res7 = []
    p.produce(topic, value=b"on-new-partition", partition=7,
              on_delivery=lambda err, msg: res7.append((err, msg.offset() if msg else None)))
    check(p.flush(30) == 0, "produce to partition 7 not delivered in 30 s")
    check(res7 and res7[0][0] is None and res7[0][1] == 0, f"produce to partition 7: {res7}")
    c = Consumer(dict(common, **{"group.id": "ringlog-e2e-unused", "enable.partition.eof": True}))
    c.assign([TopicPartition(topic, 7, 0)])
    m = None
    deadline = time.time() + 30
    while time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            break
    check(m is not None and not m.error() and m.value() == b"on-new-partition",
          f"read back partition 7: {m.error() if m is not None and m.error() else m}")
    c.close()


    step("acks=0 and acks=1")
    small = topic + "-acks"
    result(admin.create_topics([NewTopic(small, 1, 1)], request_timeout=30)[small],
           f"create {small}")
    wait_partitions(admin, small, 1)
    for acks in ("0", "1"):
        p = Producer(dict(common, **{"acks": acks, "linger.ms": 5}))
        errs = []
        for i in range(1000):
            p.produce(small, value=f"acks{acks}-{i}".encode(), partition=0,
                      on_delivery=lambda err, msg: err and errs.append(str(err)))
        check(p.flush(30) == 0, f"acks={acks}: not flushed in 30 s")
        check(not errs, f"acks={acks}: delivery errors {errs[:3]}")
    c = Consumer(dict(common, **{"group.id": "ringlog-e2e-unused", "check.crcs": True,
                                 "enable.partition.eof": True}))
    deadline = time.time() + 20
    while True:
        lo, hi = c.get_watermark_offsets(TopicPartition(small, 0), timeout=10)
        if hi == 2000 or time.time() > deadline:
            break
        time.sleep(0.2)
    expect((lo, hi) == (0, 2000), f"after 1000 acks=0 + 1000 acks=1: watermarks ({lo}, {hi})")
    c.assign([TopicPartition(small, 0, 0)])
    vals = []
    deadline = time.time() + 30
    while len(vals) < hi and time.time() < deadline:
        for m in c.consume(1000, timeout=1.0):
            if not m.error():
                vals.append(m.value().decode())
    want = [f"acks0-{i}" for i in range(1000)] + [f"acks1-{i}" for i in range(1000)]
    expect(vals == want, f"acks=0/1 read back {len(vals)} values, first diff at "
           f"{next((k for k, (a, b) in enumerate(zip(vals, want)) if a != b), min(len(vals), len(want)))}")

    step("Fetch long-poll wakes up on produce")
    c.close()
    # A fresh consumer (librdkafka reports EOF once per partition per consumer).
    c = Consumer(dict(common, **{"group.id": "ringlog-e2e-unused", "enable.partition.eof": True}))
    c.assign([TopicPartition(small, 0, hi)])
    got_eof = False
    deadline = time.time() + 10
    while not got_eof and time.time() < deadline:
        m = c.poll(0.5)
        got_eof = m is not None and m.error() and m.error().code() == KafkaError._PARTITION_EOF
    check(got_eof, "no partition EOF at the high watermark (empty fetch not accepted?)")
    p = Producer(dict(common, **{"acks": "all"}))
    p.produce(small, value=b"late", partition=0)
    check(p.flush(30) == 0, "late message not delivered")
    m, deadline = None, time.time() + 20
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            break
    check(m is not None and not m.error() and m.value() == b"late" and m.offset() == hi,
          f"waiting consumer did not get the new message: {m and (m.error() or m.value())}")
    c.close()

    step("max.message.bytes -> MSG_SIZE_TOO_LARGE")
    res = ConfigResource(ResourceType.TOPIC, small, incremental_configs=[
        ConfigEntry("max.message.bytes", "10000", incremental_operation=AlterConfigOpType.SET)])
    result(admin.incremental_alter_configs([res], request_timeout=30)[res],
           "alter max.message.bytes=10000")
    p = Producer(dict(common, **{"acks": "all", "retries": 0}))
    errs = []
    p.produce(small, value=bytes(20_000), partition=0, on_delivery=lambda e, m: errs.append(e))
    p.flush(30)
    expect(len(errs) == 1 and errs[0] is not None
           and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE,
           f"20 kB record on max.message.bytes=10000: {errs}")

    step("message.timestamp.type=LogAppendTime")
    lat = topic + "-lat"
    result(admin.create_topics([NewTopic(lat, 1, 1, config={
        "message.timestamp.type": "LogAppendTime"})], request_timeout=30)[lat], f"create {lat}")
    wait_partitions(admin, lat, 1)
    before = int(time.time() * 1000) - 60_000
    p = Producer(dict(common, **{"acks": "all", "compression.type": "lz4"}))
    for i in range(10):
        p.produce(lat, value=f"lat-{i}".encode(), partition=0, timestamp=1_000_000_000_000 + i)
    check(p.flush(30) == 0, "LogAppendTime produce not delivered")
    after = int(time.time() * 1000) + 60_000
    c = Consumer(dict(common, **{"group.id": "ringlog-e2e-unused", "check.crcs": True}))
    c.assign([TopicPartition(lat, 0, 0)])
    msgs, deadline = [], time.time() + 20
    while len(msgs) < 10 and time.time() < deadline:
        for m in c.consume(10, timeout=1.0):
            check(not m.error(), f"consume {lat}: {m.error()}")
            msgs.append(m)
    c.close()
    check([m.value() for m in msgs] == [f"lat-{i}".encode() for i in range(10)],
          f"LogAppendTime topic read back {[m.value() for m in msgs]}")
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    for m in msgs:
        tstype, ts = m.timestamp()
        expect(tstype == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after,
               f"{lat}@{m.offset()}: timestamp type {tstype} value {ts}, want LogAppendTime "
               f"(type {TIMESTAMP_LOG_APPEND_TIME}) near now")
    for t in (small, lat):
        result(admin.delete_topics([t], request_timeout=30)[t], f"delete {t}")

    step("DeleteTopics")
    fs = admin.delete_topics([topic], operation_timeout=10, request_timeout=30)
    result(fs[topic], f"delete {topic}")
    deadline = time.time() + 20
    while topic in admin.list_topics(timeout=10).topics:
        check(time.time() < deadline, f"{topic} still listed 20 s after DeleteTopics")
        time.sleep(0.1)

    step("Re-create a deleted topic: starts empty")
    result(admin.create_topics([NewTopic(topic, 2, 1)], request_timeout=30)[topic],
           f"re-create {topic}")
    wait_partitions(admin, topic, 2)
    c = Consumer(dict(common, **{"group.id": "ringlog-e2e-unused"}))
    for part in range(2):
        wm = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        expect(wm == (0, 0), f"re-created {topic} p{part}: watermarks {wm}, want (0, 0)")
    p = Producer(dict(common, **{"acks": "all"}))
    res = []
    p.produce(topic, value=b"reborn", partition=0,
              on_delivery=lambda e, m: res.append((e, m.offset())))
    check(p.flush(30) == 0, "produce to the re-created topic not delivered")
    expect(res == [(None, 0)], f"first produce to the re-created topic: {res}, want offset 0")
    c.assign([TopicPartition(topic, 0, 0)])
    m, deadline = None, time.time() + 20
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            break
    expect(m is not None and not m.error() and m.value() == b"reborn",
           f"re-created topic reads {m and (m.error() or m.value())}, want b'reborn'")
    c.close()
    result(admin.delete_topics([topic], request_timeout=30)[topic], f"delete {topic} again")

    SUMMARY["messages"] = total
    fail_on_soft()
    SUMMARY["ok"] = True
    SUMMARY["client_errors"] = errors_seen[:5]
    print(json.dumps(SUMMARY))


if __name__ == "__main__":
    main()
