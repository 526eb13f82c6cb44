#!/usr/bin/env python3
"""A consumer that reads a topic from offset 0 while a test kills brokers, and reports what it saw.

usage: watch_log.py BOOTSTRAP TOPIC PARTITIONS STOP_FILE

Prints "SEEN <partition> <offset> <value>" for every record delivered (stdout unbuffered)
until STOP_FILE exists, then "DONE seen=N". Errors while leaders move are retried by the client
and logged to stderr; only what was delivered counts.
"""
import os
import sys

from confluent_kafka import Consumer, KafkaError, TopicPartition

bootstrap, topic, parts, stop_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-e2e-watch",
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "topic.metadata.refresh.interval.ms": 1000, "check.crcs": True,
              "error_cb": lambda e: print(f"client error: {e}", file=sys.stderr, flush=True)})
c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
seen = 0
while not os.path.exists(stop_file):
    for m in c.consume(num_messages=1000, timeout=0.5):
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                print(f"consume error: {m.error()}", file=sys.stderr, flush=True)
            continue
        seen += 1
        sys.stdout.write(f"SEEN {m.partition()} {m.offset()} {m.value().decode(errors='replace')}\n")
    sys.stdout.flush()
c.close()
print(f"DONE seen={seen}", flush=True)
