#!/usr/bin/env python3
"""Reads every record of TOPICs from the beginning to the high watermark, with the client
CLIENT (confluent-kafka or kafka-python), as a plain consumer does.

usage: barrier_consume.py BOOTSTRAP CLIENT TOPIC...

Prints "REC <topic> <partition> <offset> <value>" for each record the client hands out, then
"END <topic> <partition> <high watermark>" per partition. Barrier markers are control records:
a client must never hand one out (the test checks their offsets never appear).
"""
import sys
import time

bootstrap, client, topics = sys.argv[1], sys.argv[2], sys.argv[3:]
DEADLINE_S = 60


def out(line):
    sys.stdout.write(line + "\n")


if client == "confluent-kafka":
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "barrier-check",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    parts = []
    for t in topics:
        md = c.list_topics(t, timeout=10)
        for p in md.topics[t].partitions:
            parts.append(TopicPartition(t, p, 0))
    ends = {}
    for tp in parts:
        lo, hi = c.get_watermark_offsets(tp, timeout=10)
        ends[(tp.topic, tp.partition)] = hi
    c.assign(parts)
    pos = {k: 0 for k in ends}
    end = time.time() + DEADLINE_S
    while any(pos[k] < ends[k] for k in ends) and time.time() < end:
        for m in c.consume(500, 1.0):
            if m.error():
                continue
            out(f"REC {m.topic()} {m.partition()} {m.offset()} {m.value().decode()}")
            k = (m.topic(), m.partition())
            pos[k] = max(pos[k], m.offset() + 1)
        # A partition whose last record is a marker never gets a record at hw-1.
        for tp in c.position([TopicPartition(t, p) for (t, p) in ends]):
            if tp.offset >= 0:
                pos[(tp.topic, tp.partition)] = max(pos[(tp.topic, tp.partition)], tp.offset)
    c.close()
elif client == "kafka-python":
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    parts = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or [])]
    c.assign(parts)
    c.seek_to_beginning(*parts)
    ends = {(tp.topic, tp.partition): o for tp, o in c.end_offsets(parts).items()}
    end = time.time() + DEADLINE_S
    while any(c.position(TopicPartition(t, p)) < ends[(t, p)] for (t, p) in ends) and time.time() < end:
        for tp, msgs in c.poll(timeout_ms=1000, max_records=500).items():
            for m in msgs:
                out(f"REC {m.topic} {m.partition} {m.offset} {m.value.decode()}")
    c.close()
else:
    sys.exit(f"unknown client {client}")
for (t, p), hw in sorted(ends.items()):
    out(f"END {t} {p} {hw}")
sys.stdout.flush()
