#!/usr/bin/env python3
"""Prints a group's committed offsets for TOPIC as JSON {partition: offset}, read with the
client named: confluent | kafka-python. usage: group_offsets.py CLIENT BOOTSTRAP GROUP TOPIC PARTITIONS"""
import json, sys

client, bootstrap, group, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
out = {}
if client == "confluent":
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10):
        out[tp.partition] = tp.offset
    c.close()
else:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    for p in range(partitions):
        o = c.committed(TopicPartition(topic, p))
        out[p] = -1001 if o is None else o
    c.close()
print(json.dumps(out))
