#!/usr/bin/env python3
"""A confluent-kafka group consumer for the consumer-group tests.

usage: group_consumer.py BOOTSTRAP GROUP TOPIC STRATEGY OUTFILE [INSTANCE_ID]
Subscribes, appends every consumed value (one per line) to OUTFILE as it arrives, commits
offsets automatically, and leaves the group cleanly on SIGTERM.
"""
import signal, sys
from confluent_kafka import Consumer

bootstrap, group, topic, strategy, outfile = sys.argv[1:6]
instance = sys.argv[6] if len(sys.argv) > 6 else None
conf = {
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "partition.assignment.strategy": strategy,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 300,
}
if instance:
    conf["group.instance.id"] = instance
stop = [False]
signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
c = Consumer(conf)
c.subscribe([topic], on_assign=lambda cons, parts: print("assigned", sorted(p.partition for p in parts), flush=True))
with open(outfile, "a", buffering=1) as out:
    while not stop[0]:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            print("error", m.error(), flush=True)
            continue
        out.write(m.value().decode() + "\n")
c.close()
print("closed", flush=True)
