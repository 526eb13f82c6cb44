#!/usr/bin/env python3
"""An idempotent confluent-kafka producer against a topic with max.message.bytes=2000:
small records, then records the broker refuses as too large, then small records again, each
phase flushed. Every acknowledged record must be in the partition at its offset with its
value, and nothing else may be: a refused batch is never stored, a retried one never twice.

usage: idempotent_producer.py BOOTSTRAP TOPIC N
Prints a JSON summary as its last line ({"ok": true, ...}).
"""
import json
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
acked = {}  # offset -> value
failed = []


def on_delivery(err, msg):
    if err is None:
        acked[msg.offset()] = msg.value()
    else:
        failed.append((msg.value()[:16].decode(), str(err)))


p = Producer({
    "bootstrap.servers": bootstrap,
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    # Batches stay below the topic's max.message.bytes (it applies to a whole batch).
    "batch.size": 1500,
    "message.timeout.ms": 30_000,
    "error_cb": lambda e: print(f"client error: {e}", file=sys.stderr, flush=True),
})
phases = [("small-a", n, 20), ("large", 5, 5_000), ("small-b", n, 20)]
for name, count, size in phases:
    for i in range(count):
        value = f"{name}-{i:06d}-".encode().ljust(size, b"x")
        while True:
            try:
                p.produce(topic, value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    p.flush(30)

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "idempotence-check",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
})
c.assign([TopicPartition(topic, 0, 0)])
stored = {}
empty_polls = 0
while empty_polls < 10:
    m = c.poll(0.5)
    if m is None:
        empty_polls += 1
        continue
    if m.error():
        continue
    empty_polls = 0
    stored[m.offset()] = m.value()
c.close()

problems = []
for off, v in acked.items():
    if stored.get(off) != v:
        problems.append(f"acknowledged offset {off} holds {stored.get(off, b'<nothing>')[:24]!r}, not {v[:24]!r}")
for off in stored:
    if off not in acked:
        problems.append(f"offset {off} is stored but was never acknowledged")
large_acked = sum(1 for v in acked.values() if v.startswith(b"large"))
if large_acked:
    problems.append(f"{large_acked} too-large records were acknowledged")
small_a = sum(1 for v in acked.values() if v.startswith(b"small-a"))
if small_a != n:
    problems.append(f"only {small_a} of {n} records of the first phase were acknowledged")
small_b = sum(1 for v in acked.values() if v.startswith(b"small-b"))
if small_b != n:
    problems.append(f"only {small_b} of {n} records after the refused ones were acknowledged")
summary = {
    "ok": not problems,
    "acked": len(acked),
    "stored": len(stored),
    "failed": len(failed),
    "small_b_acked": small_b,
    "problems": problems[:10],
    "failures": failed[:3],
}
print(json.dumps(summary))
