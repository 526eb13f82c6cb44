"""Metastore writes through one node (issue #17's benchmark): CreateTopics of one-partition
topics, one request at a time, through the admin API of BROKER, then DeleteTopics of them.
Prints one JSON line: creates/s and deletes/s.

usage: cluster_admin_bench.py BROKER COUNT PREFIX
"""
import json
import sys
import time

from confluent_kafka.admin import AdminClient, NewTopic


def main():
    broker, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    admin = AdminClient({"bootstrap.servers": broker})
    names = [f"{prefix}-{i}" for i in range(count)]
    t0 = time.perf_counter()
    for n in names:
        admin.create_topics([NewTopic(n, 1, 1)], request_timeout=30)[n].result()
    created = time.perf_counter() - t0
    t0 = time.perf_counter()
    for n in names:
        admin.delete_topics([n], request_timeout=30)[n].result()
    deleted = time.perf_counter() - t0
    print(json.dumps({"broker": broker, "count": count,
                      "creates_per_s": round(count / created, 1),
                      "deletes_per_s": round(count / deleted, 1)}))


main()
