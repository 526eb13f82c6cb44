#!/usr/bin/env python3
"""Admin calls against a core-direct broker, for the core-direct tests.

usage: core_direct_admin.py BOOTSTRAP TOPIC NEW_TOTAL BROKER_ID...

DescribeCluster, then CreatePartitions growing TOPIC to NEW_TOTAL partitions with the new
partitions assigned to the given broker ids in turn, then Metadata. Prints one JSON line:
the cluster's controller and broker ids, and every partition's leader.
Exits non-zero with a message on stderr on any failure.
"""
import json
import sys
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


bootstrap, topic, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
ids = [int(x) for x in sys.argv[4:]]
admin = AdminClient({"bootstrap.servers": bootstrap})
cluster = admin.describe_cluster(request_timeout=10).result(timeout=30)
current = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
assignment = [[ids[i % len(ids)]] for i in range(total - current)]
fs = admin.create_partitions([NewPartitions(topic, total, replica_assignment=assignment)], request_timeout=30)
try:
    fs[topic].result(timeout=30)
except KafkaException as e:
    fail(f"CreatePartitions {topic} to {total} with {assignment}: {e.args[0]}")
deadline = time.time() + 20
while True:
    t = admin.list_topics(topic, timeout=10).topics[topic]
    if len(t.partitions) == total:
        break
    if time.time() > deadline:
        fail(f"{topic} shows {len(t.partitions)} partitions, want {total}")
    time.sleep(0.1)
print(json.dumps({
    "controller": cluster.controller.id,
    "nodes": sorted(n.id for n in cluster.nodes),
    "leaders": {p: part.leader for p, part in t.partitions.items()},
}), flush=True)
