#!/usr/bin/env python3
"""Reads a topic with read_committed once no transaction holds it back (issue #14).

usage: txn_verify.py BOOTSTRAP TOPIC PARTITIONS WAIT_S

Waits (at most WAIT_S) until every partition's read_committed end (the last stable offset)
equals its read_uncommitted end (the high watermark), then reads every partition from 0 with
read_committed. Prints a JSON object: "stable_after_s" (how long the wait took), "counts"
({"TID:TXN": records seen}) and "total".
"""
import json
import sys
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, KafkaError, TopicPartition

bootstrap, topic, partitions, wait_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])


def consumer(isolation):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"verify-{uuid.uuid4().hex[:6]}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })


rc, ru = consumer("read_committed"), consumer("read_uncommitted")
t0 = time.time()
ends = None
while time.time() - t0 < wait_s:
    try:
        committed_ends = [rc.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                          for p in range(partitions)]
        all_ends = [ru.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    for p in range(partitions)]
    except Exception:  # the broker is still starting
        time.sleep(0.2)
        continue
    if committed_ends == all_ends:
        ends = all_ends
        break
    time.sleep(0.1)
stable_after = time.time() - t0
if ends is None:
    print(f"FAIL: the last stable offset did not reach the high watermark within {wait_s} s", file=sys.stderr)
    sys.exit(1)
ru.close()
rc.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
counts = Counter()
positions = [0] * partitions
deadline = time.time() + 60
while time.time() < deadline and any(positions[p] < ends[p] for p in range(partitions)):
    m = rc.poll(0.5)
    if m is None:
        continue
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            positions[m.partition()] = max(positions[m.partition()], m.offset())
            continue
        print(f"FAIL: consume: {m.error()}", file=sys.stderr)
        sys.exit(1)
    positions[m.partition()] = m.offset() + 1
    tid, txn, _ = m.value().decode().split(":")
    counts[f"{tid}:{txn}"] += 1
rc.close()
print(json.dumps({"stable_after_s": round(stable_after, 3), "counts": counts,
                  "total": sum(counts.values())}))
