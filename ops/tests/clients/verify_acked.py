#!/usr/bin/env python3
"""Checks that every acknowledged message is readable where it was acknowledged.

usage: verify_acked.py BOOTSTRAP TOPIC PARTITIONS ACKS_FILE [SEEN_FILE [unique]]

ACKS_FILE holds lines "<partition> <offset> <value>". Reads every partition from offset 0 to
its end with assign() (confluent-kafka), and checks: offsets are contiguous from 0, and each
acknowledged (partition, offset) holds that value. With SEEN_FILE (lines
"<partition> <offset> <value>" a consumer saw while the test ran), each of those holds that
value too: no consumer saw a record that was later truncated. With "unique", every
acknowledged value is in the log once. Prints a JSON summary; exits 1 on a failure.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

bootstrap, topic, parts, acks_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
seen_file = sys.argv[5] if len(sys.argv) > 5 else None
unique = len(sys.argv) > 6 and sys.argv[6] == "unique"
acked = {}
with open(acks_file) as f:
    for line in f:
        p, o, v = line.rstrip("\n").split(" ", 2)
        acked[(int(p), int(o))] = v

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-e2e-unused",
              "enable.auto.commit": False, "enable.partition.eof": True,
              "auto.offset.reset": "error", "check.crcs": True})
hw = {}
for p in range(parts):
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    if lo != 0:
        print(f"FAIL: partition {p} log start offset {lo}, want 0", file=sys.stderr)
        sys.exit(1)
    hw[p] = hi
c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
log = {p: {} for p in range(parts)}
done = set(p for p in range(parts) if hw[p] == 0)
deadline = time.time() + 90
while len(done) < parts:
    if time.time() > deadline:
        print(f"FAIL: read {[len(log[p]) for p in range(parts)]} of {hw} in 90 s", file=sys.stderr)
        sys.exit(1)
    for m in c.consume(num_messages=10_000, timeout=1.0):
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                if len(log[m.partition()]) >= hw[m.partition()]:
                    done.add(m.partition())
                continue
            print(f"FAIL: consume error {m.error()}", file=sys.stderr)
            sys.exit(1)
        log[m.partition()][m.offset()] = m.value().decode(errors="replace")
c.close()

errors = []
for p in range(parts):
    offs = sorted(log[p])
    if offs != list(range(len(offs))):
        gap = next(i for i, o in enumerate(offs) if o != i)
        errors.append(f"partition {p}: offsets not contiguous from 0 (first gap at {gap})")
for (p, o), v in sorted(acked.items()):
    have = log[p].get(o)
    if have != v:
        errors.append(f"acknowledged p{p}@{o}={v!r} reads back as {have!r} (high watermark {hw[p]})")
seen = 0
if seen_file:
    with open(seen_file) as f:
        for line in f:
            if not line.startswith("SEEN "):
                continue
            seen += 1
            p, o, v = line.rstrip("\n")[5:].split(" ", 2)
            have = log[int(p)].get(int(o))
            if have != v:
                errors.append(f"a consumer saw p{p}@{o}={v!r}, the log holds {have!r} (truncated?)")
if unique:
    counts = {}
    for p in range(parts):
        for v in log[p].values():
            counts[v] = counts.get(v, 0) + 1
    for v in set(acked.values()):
        if counts.get(v, 0) != 1:
            errors.append(f"acknowledged value {v!r} is in the log {counts.get(v, 0)} times")
if errors:
    print("FAIL: " + "\n".join(errors[:20]) + f"\n({len(errors)} errors)", file=sys.stderr)
    sys.exit(1)
print(json.dumps({"ok": True, "acked": len(acked), "seen": seen,
                  "log": {p: len(log[p]) for p in range(parts)}}))
