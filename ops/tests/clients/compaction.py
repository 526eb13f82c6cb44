#!/usr/bin/env python3
"""Log compaction seen from confluent-kafka (issue #11).

  compaction.py produce BOOTSTRAP TOPIC START COUNT KEYS CODEC
      Record i (START <= i < START+COUNT) on partition 0: key "k<i % KEYS>", value "v<i>",
      except tombstones (value None) for i % 997 == 0, and for the last write of every key
      whose number ends in 3 (i >= START+COUNT-KEYS). Idempotent, acks=all; exits 1 if any
      delivery failed.
  compaction.py produce-one BOOTSTRAP TOPIC KEY VALUE
  compaction.py commit-many BOOTSTRAP TOPIC GROUP COUNT
      Commits offsets 1..=COUNT of partition 0 for GROUP, one synchronous commit each.
  compaction.py committed BOOTSTRAP TOPIC GROUP
      Prints GROUP's committed offset of partition 0.
  compaction.py consume BOOTSTRAP TOPIC
      Partition 0 from the beginning to the high watermark: JSON
      {"low": L, "high": H, "records": [[offset, key, value or null], ...]}.
"""
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition


def is_tombstone(i, end, keys):
    return i % 997 == 0 or (i >= end - keys and (i % keys) % 10 == 3)


def producer(bootstrap, codec="none"):
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "compression.type": codec,
    })


def deliver_all(p, items, topic):
    failed = []

    def cb(err, _msg):
        if err is not None:
            failed.append(str(err))

    for key, value in items:
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(60)
    if failed or left:
        print(f"delivery failed: {failed[:5]} ({left} undelivered)", file=sys.stderr)
        sys.exit(1)


def main():
    cmd, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if cmd == "produce":
        start, count, keys = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
        end = start + count
        items = ((f"k{i % keys}", None if is_tombstone(i, end, keys) else f"v{i}")
                 for i in range(start, end))
        deliver_all(producer(bootstrap, sys.argv[7]), items, topic)
    elif cmd == "produce-one":
        deliver_all(producer(bootstrap), [(sys.argv[4], sys.argv[5])], topic)
    elif cmd in ("commit-many", "committed"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": sys.argv[4],
                      "enable.auto.commit": False})
        if cmd == "commit-many":
            for i in range(1, int(sys.argv[5]) + 1):
                c.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=False)
        else:
            print(c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset)
        c.close()
    elif cmd == "consume":
        c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"compaction-reader-{time.time()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        })
        tp = TopicPartition(topic, 0)
        low, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records = []
        deadline = time.time() + 60
        done = high == 0
        while not done and time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    done = m.offset() >= high
                    continue
                raise SystemExit(f"consume: {m.error()}")
            value = m.value()
            records.append([m.offset(), m.key().decode(), None if value is None else value.decode()])
            done = m.offset() + 1 >= high
        c.close()
        if not done:
            raise SystemExit(f"consume: did not reach the high watermark {high} in 60 s")
        print(json.dumps({"low": low, "high": high, "records": records}))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
