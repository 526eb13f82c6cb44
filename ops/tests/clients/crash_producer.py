#!/usr/bin/env python3
"""Producer for the crash test: acks=all, writes for SECONDS seconds, then flushes.

usage: crash_producer.py BOOTSTRAP TOPIC PREFIX SECONDS [idempotent]

Prints "ACK <partition> <offset> <value>" for every acknowledged message, as soon as the
acknowledgement arrives (stdout unbuffered), "FAILED <value> <error>" for a message the client
gave up on, and finally "DONE sent=N acked=M failed=F". The broker is killed and restarted while
this runs, so failures are allowed; only acknowledged messages carry a promise.
"""
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, prefix, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
# "idempotent": retries after a failover are not written twice.
idempotent = len(sys.argv) > 5 and sys.argv[5] == "idempotent"
acked = failed = sent = 0


def on_delivery(err, msg):
    global acked, failed
    if err is None:
        acked += 1
        sys.stdout.write(f"ACK {msg.partition()} {msg.offset()} {msg.value().decode()}\n")
    else:
        failed += 1
        sys.stdout.write(f"FAILED {msg.value().decode()} {err}\n")
    sys.stdout.flush()


p = Producer({
    "bootstrap.servers": bootstrap,
    "acks": "all",
    "enable.idempotence": idempotent,
    "linger.ms": 2,
    "message.timeout.ms": 30_000,
    "queue.buffering.max.messages": 20_000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "error_cb": lambda e: print(f"client error: {e}", file=sys.stderr, flush=True),
})
end = time.time() + seconds
while time.time() < end:
    value = f"{prefix}-{sent}"
    try:
        p.produce(topic, value=value.encode(), on_delivery=on_delivery)
        sent += 1
    except BufferError:
        p.poll(0.05)
        continue
    if sent % 20 == 0:
        p.poll(0.001)
left = p.flush(60)
print(f"DONE sent={sent} acked={acked} failed={failed} unflushed={left}", flush=True)
