#!/usr/bin/env python3
"""kafka-python 3 transactions against a ringlog broker (issue #14).

usage: kafka_python_txn.py BOOTSTRAP

A transactional KafkaProducer commits one transaction and aborts the next over 3 partitions; a
read_committed KafkaConsumer sees exactly the committed records, a read_uncommitted one all.
Prints a JSON summary on success; exits 1 with "FAIL: detail" on stderr otherwise.
"""
import json
import sys
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap = sys.argv[1]
topic = f"kp-txn-{uuid.uuid4().hex[:8]}"
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
admin.close()

p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{topic}")
p.init_transactions()
committed, aborted = [], []
for r in range(4):
    p.begin_transaction()
    vals = [f"r{r}-{i}" for i in range(20)]
    for i, v in enumerate(vals):
        p.send(topic, value=v.encode(), partition=i % 3)
    p.flush()
    if r % 2 == 0:
        p.commit_transaction()
        committed += vals
    else:
        p.abort_transaction()
        aborted += vals
p.close()


def read(isolation, want):
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [TopicPartition(topic, i) for i in range(3)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = []
    deadline = time.time() + 30
    while time.time() < deadline and len(got) < want:
        for batch in c.poll(timeout_ms=500).values():
            got += [m.value.decode() for m in batch]
    # Nothing more arrives after the expected count.
    for batch in c.poll(timeout_ms=1000).values():
        got += [m.value.decode() for m in batch]
    c.close()
    return got


rc = read("read_committed", len(committed))
if sorted(rc) != sorted(committed):
    print(f"FAIL: read_committed saw {len(rc)}, want the {len(committed)} committed", file=sys.stderr)
    sys.exit(1)
ru = read("read_uncommitted", len(committed) + len(aborted))
if sorted(ru) != sorted(committed + aborted):
    print(f"FAIL: read_uncommitted saw {len(ru)}, want {len(committed) + len(aborted)}", file=sys.stderr)
    sys.exit(1)
print(json.dumps({"client": "kafka-python", "committed": len(committed), "aborted": len(aborted), "ok": True}))
