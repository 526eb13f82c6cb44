#!/usr/bin/env python3
"""Two confluent-kafka producers at once against ringlog, one with a client id that has a
produce quota (issue #19): each sends 1000-byte values as fast as it can for RUN_S seconds.

  quota_rate.py BOOTSTRAP TOPIC SLOW_CLIENT_ID FAST_CLIENT_ID
      Prints a JSON line {"slow_bytes_per_s": ..., "fast_bytes_per_s": ...}: the value bytes
      each had acknowledged per second after the first WARMUP_S seconds (the quota's burst
      and the clients' start are left out).
  quota_rate.py fetch BOOTSTRAP TOPIC SLOW_CLIENT_ID FAST_CLIENT_ID
      The same for two consumers reading TOPIC from its start at once (the slow one under a
      fetch quota): {"slow_fetch_bytes_per_s": ..., "fast_fetch_bytes_per_s": ...}, the value
      bytes each consumed per second after the first WARMUP_S seconds.
"""
import json
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

RUN_S = 14.0
WARMUP_S = 4.0
VALUE = b"q" * 1000


def produce(bootstrap, topic, client_id, start, out):
    acked = []  # (time, bytes) of each acknowledged record
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all",
                  "linger.ms": 5, "compression.type": "none",
                  "queue.buffering.max.kbytes": 4096,
                  # Requests of 64 KiB at most: a 1 MiB batch would be a whole second of the
                  # quota, and the window would count whole seconds.
                  "batch.size": 65536})

    def done(err, msg):
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    while time.monotonic() - start < RUN_S:
        try:
            p.produce(topic, VALUE, on_delivery=done)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(30)
    end = start + RUN_S
    sent = sum(n for t, n in acked if start + WARMUP_S <= t <= end)
    out[client_id] = sent / (RUN_S - WARMUP_S)


def consume(bootstrap, topic, client_id, start, out):
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                  "group.id": f"quota-{client_id}", "enable.auto.commit": False,
                  # Responses of 64 KiB at most, as the producer's requests above.
                  "fetch.max.bytes": 65536, "max.partition.fetch.bytes": 65536,
                  "message.max.bytes": 65536})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while time.monotonic() - start < RUN_S:
        m = c.poll(0.1)
        if m is not None and m.error() is None and time.monotonic() - start >= WARMUP_S:
            got += len(m.value())
    c.close()
    out[client_id] = got / (RUN_S - WARMUP_S)


def main():
    if sys.argv[1] == "fetch":
        bootstrap, topic, slow, fast = sys.argv[2:6]
        out = {}
        start = time.monotonic()
        threads = [threading.Thread(target=consume, args=(bootstrap, topic, c, start, out))
                   for c in (slow, fast)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps({"slow_fetch_bytes_per_s": out[slow],
                          "fast_fetch_bytes_per_s": out[fast]}))
        return
    bootstrap, topic, slow, fast = sys.argv[1:5]
    out = {}
    start = time.monotonic()
    threads = [threading.Thread(target=produce, args=(bootstrap, topic, c, start, out))
               for c in (slow, fast)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"slow_bytes_per_s": out[slow], "fast_bytes_per_s": out[fast]}))


if __name__ == "__main__":
    main()
