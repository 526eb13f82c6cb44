#!/usr/bin/env python3
"""A paced background writer for the benchmarks (confluent-kafka, acks=all):

  noise_writer.py BOOTSTRAP TOPIC RATE [KEYS]

RATE 1 KiB records per second into TOPIC, forever; with KEYS, record i has key
"key-<i % KEYS>" (a compacted topic's steady overwrite load), else no key.
"""
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
keys = int(sys.argv[4]) if len(sys.argv) > 4 else 0
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
value, sent, t0 = b"n" * 1024, 0, time.time()
while True:
    due = int((time.time() - t0) * rate)
    while sent < due:
        try:
            key = b"key-%d" % (sent % keys) if keys else None
            p.produce(topic, value, key=key)
            sent += 1
        except BufferError:
            p.poll(0.01)
    p.poll(0.005)
