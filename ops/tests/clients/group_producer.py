#!/usr/bin/env python3
"""Produces ids FIRST..FIRST+N-1 (values "id") with acks=all at about RATE msgs/s, then prints
"DONE <acked>". usage: group_producer.py BOOTSTRAP TOPIC FIRST N RATE"""
import sys, time
from confluent_kafka import Producer

bootstrap, topic, first, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
acked = [0]
def cb(err, msg):
    if err is None:
        acked[0] += 1
    else:
        print("delivery error", err, flush=True)
start = time.time()
for i in range(n):
    p.produce(topic, key=str(i % 97).encode(), value=str(first + i).encode(), on_delivery=cb)
    p.poll(0)
    ahead = (i + 1) / rate - (time.time() - start)
    if ahead > 0:
        time.sleep(ahead)
p.flush(60)
print("DONE", acked[0], flush=True)
sys.exit(0 if acked[0] == n else 1)
