#!/usr/bin/env python3
"""Small admin helper on confluent-kafka for the Rust end-to-end tests.

  admin.py create BOOTSTRAP TOPIC PARTITIONS [key=value ...]   create, wait for metadata
  admin.py delete BOOTSTRAP TOPIC                               delete, wait until gone
  admin.py partitions BOOTSTRAP TOPIC                           print the partition count
  admin.py watermarks BOOTSTRAP TOPIC PARTITION                 print "LOW HIGH" (ListOffsets)
  admin.py produce-unknown BOOTSTRAP TOPIC                      produce to a missing topic,
                                                               expect UNKNOWN_TOPIC_OR_PART
  admin.py create-assigned BOOTSTRAP TOPIC ASSIGNMENT           create with a replica
                                                               assignment "3,1,2" (one broker
                                                               per partition; "1:2" names two)
  admin.py add-assigned BOOTSTRAP TOPIC TOTAL ASSIGNMENT        add partitions up to TOTAL,
                                                               placed by ASSIGNMENT
  (the assigned commands print "ok", or "REFUSED <error>" for a refusal)

Exits non-zero with a message on stderr on any failure.
"""
import sys
import time

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def wait_partitions(admin, topic, want, timeout=20.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        md = admin.list_topics(timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None:
            last = len(t.partitions)
            if want is None or last == want:
                return last
        time.sleep(0.1)
    fail(f"topic {topic!r}: metadata shows {last} partitions after {timeout}s, want {want}")


def main():
    cmd, bootstrap = sys.argv[1], sys.argv[2]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if cmd == "create":
        topic, parts = sys.argv[3], int(sys.argv[4])
        configs = dict(kv.split("=", 1) for kv in sys.argv[5:])
        fs = admin.create_topics(
            [NewTopic(topic, num_partitions=parts, replication_factor=1, config=configs)],
            operation_timeout=10,
            request_timeout=30,
        )
        try:
            fs[topic].result(timeout=30)
        except KafkaException as e:
            fail(f"CreateTopics {topic!r} ({parts} partitions, {configs}): {e.args[0]}")
        wait_partitions(admin, topic, parts)
        print(f"created {topic} {parts}")
    elif cmd == "delete":
        topic = sys.argv[3]
        fs = admin.delete_topics([topic], operation_timeout=10, request_timeout=30)
        try:
            fs[topic].result(timeout=30)
        except KafkaException as e:
            fail(f"DeleteTopics {topic!r}: {e.args[0]}")
        deadline = time.time() + 20
        while topic in admin.list_topics(timeout=10).topics:
            if time.time() > deadline:
                fail(f"topic {topic!r} still in metadata 20s after DeleteTopics")
            time.sleep(0.1)
        print(f"deleted {topic}")
    elif cmd == "delete-records":
        from confluent_kafka import TopicPartition
        topic, part, before = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        fs = admin.delete_records([TopicPartition(topic, part, before)], operation_timeout=10,
                                  request_timeout=30)
        try:
            for f in fs.values():
                f.result(timeout=30)
        except KafkaException as e:
            fail(f"DeleteRecords {topic}/{part} before {before}: {e.args[0]}")
        print(f"deleted {topic}/{part} before {before}")
    elif cmd == "partitions":
        print(wait_partitions(admin, sys.argv[3], None))
    elif cmd == "watermarks":
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ringlog-e2e-unused"})
        try:
            lo, hi = c.get_watermark_offsets(TopicPartition(sys.argv[3], int(sys.argv[4])),
                                             timeout=10)
        except KafkaException as e:
            fail(f"ListOffsets {sys.argv[3]}/{sys.argv[4]}: {e.args[0]}")
        c.close()
        print(lo, hi)
    elif cmd in ("create-assigned", "add-assigned"):
        from confluent_kafka.admin import NewPartitions
        topic = sys.argv[3]
        spec = sys.argv[4] if cmd == "create-assigned" else sys.argv[5]
        assignment = [[int(b) for b in part.split(":")] for part in spec.split(",")]
        if cmd == "create-assigned":
            fs = admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)],
                                     operation_timeout=10, request_timeout=30)
        else:
            fs = admin.create_partitions(
                [NewPartitions(topic, int(sys.argv[4]), replica_assignment=assignment)],
                operation_timeout=10, request_timeout=30)
        try:
            fs[topic].result(timeout=30)
            print("ok")
        except KafkaException as e:
            print(f"REFUSED {e.args[0]}")
    elif cmd == "produce-unknown":
        topic = sys.argv[3]
        md = admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is None or t.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            fail(f"Metadata for missing topic {topic!r}: want UNKNOWN_TOPIC_OR_PART, got "
                 f"{None if t is None else t.error}")
        p = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "topic.metadata.propagation.max.ms": 1000,
            "message.timeout.ms": 10000,
        })
        errors = []
        p.produce(topic, value=b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
        p.flush(30)
        if len(errors) != 1 or errors[0] is None:
            fail(f"produce to missing topic {topic!r} was not refused: {errors}")
        code = errors[0].code()
        if code not in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            fail(f"produce to missing topic {topic!r}: want UNKNOWN_TOPIC_OR_PART, got {errors[0]}")
        print(f"refused: {errors[0]}")
    else:
        fail(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
