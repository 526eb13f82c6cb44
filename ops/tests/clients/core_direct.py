#!/usr/bin/env python3
"""Produce, consume as a group, and commit through confluent-kafka, for the core-direct tests.

usage: core_direct.py BOOTSTRAP TOPIC N TAG ROUNDS

Produces N keyed messages (keys k0..k96, values "TAG-i", acks=all) in ROUNDS rounds, each
flushed before the next (so at least ROUNDS Produce requests, each round's messages reaching
every partition when N / ROUNDS >= 97), consumes them back in
consumer group "group-TAG" (manual commit), commits, then checks with a second consumer of the
group that the committed offsets are every partition's high watermark. Messages of other tags
on the topic are read and skipped. Prints one JSON line: the brokers and partition leaders the
client saw in Metadata, messages produced per partition, and the committed offsets.
Exits non-zero with a message on stderr on any failure.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TIMEOUT_S = 60


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


bootstrap, topic, n, tag, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
group = f"group-{tag}"

p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
md = p.list_topics(topic, timeout=10)
t = md.topics.get(topic)
if t is None or t.error is not None:
    fail(f"metadata for {topic}: {t.error if t else 'missing'}")
brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
leaders = {pid: part.leader for pid, part in t.partitions.items()}
partitions = sorted(t.partitions)

errors = []
per_partition = {}


def delivered(err, msg):
    if err is not None:
        errors.append(str(err))
    else:
        per_partition[msg.partition()] = per_partition.get(msg.partition(), 0) + 1


for i in range(n):
    while True:
        try:
            p.produce(topic, key=f"k{i % 97}".encode(), value=f"{tag}-{i}".encode(), on_delivery=delivered)
            break
        except BufferError:
            p.poll(0.05)
    p.poll(0)
    if (i + 1) % max(1, n // rounds) == 0 or i + 1 == n:
        left = p.flush(TIMEOUT_S)
        if left or errors:
            fail(f"produce: {left} undelivered, errors {errors[:5]}")

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
})
c.subscribe([topic])
seen = set()
deadline = time.time() + TIMEOUT_S
while len(seen) < n and time.time() < deadline:
    m = c.poll(0.2)
    if m is None:
        continue
    if m.error():
        fail(f"consume: {m.error()}")
    v = m.value().decode()
    if v.startswith(f"{tag}-"):
        seen.add(int(v.split("-", 1)[1]))
if len(seen) < n:
    fail(f"consumed {len(seen)} of {n} messages of tag {tag} in {TIMEOUT_S}s")
try:
    c.commit(asynchronous=False)
except KafkaException as e:
    fail(f"commit: {e}")
c.close()

check = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
committed = check.committed([TopicPartition(topic, q) for q in partitions], timeout=10)
high = {q: check.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1] for q in partitions}
check.close()
offsets = {tp.partition: tp.offset for tp in committed}
for q in partitions:
    if offsets.get(q) != high[q]:
        fail(f"partition {q}: committed {offsets.get(q)}, high watermark {high[q]}")

print(json.dumps({
    "brokers": brokers,
    "leaders": leaders,
    "produced": per_partition,
    "committed": offsets,
}), flush=True)
