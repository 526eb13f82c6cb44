#!/usr/bin/env python3
"""kafka-python group consumer: joins GROUP, consumes TOPIC until it has EXPECT messages,
commits synchronously, prints the number consumed. usage: kafka_python_group.py BOOTSTRAP GROUP TOPIC EXPECT"""
import sys, time
from kafka import KafkaConsumer

bootstrap, group, topic, expect = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000)
n = 0
deadline = time.time() + 60
while n < expect and time.time() < deadline:
    for tp, msgs in c.poll(timeout_ms=500).items():
        n += len(msgs)
c.commit()
c.close()
print(n)
sys.exit(0 if n >= expect else 1)
