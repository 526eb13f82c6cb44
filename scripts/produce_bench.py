#!/usr/bin/env python3
"""Produce benchmark for a Kafka-compatible broker (stand-in until ringlog-bench lands).

Two phases against one topic:
  1. max rate: produce N messages as fast as the client can (acks=all), report MiB/s;
  2. fixed rate: produce at a fraction of that rate and report delivery latency p50/p99/p99.9
     measured by librdkafka from produce() to the acknowledgement (Message.latency()).
Prints one JSON line with the figures. Driver: confluent-kafka (librdkafka).
"""
import argparse, json, sys, time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def percentile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, int(q * len(sorted_vals)))
    return sorted_vals[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="bench")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--message-bytes", type=int, default=1024)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--latency-rate-fraction", type=float, default=0.5)
    a = ap.parse_args()

    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for f in admin.create_topics([NewTopic(a.topic, num_partitions=a.partitions, replication_factor=1)]).values():
        try:
            f.result()
        except Exception as e:  # already exists is fine for reruns
            print(f"create topic: {e}", file=sys.stderr)

    conf = {"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 1,
            "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000}
    payload = b"x" * a.message_bytes

    # Phase 1: max throughput.
    p = Producer(conf)
    errors = [0]
    def on_err(err, msg):
        if err:
            errors[0] += 1
    t0 = time.perf_counter()
    for i in range(a.messages):
        while True:
            try:
                p.produce(a.topic, value=payload, key=str(i).encode(), on_delivery=on_err)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    secs = time.perf_counter() - t0
    max_rate = a.messages / secs
    mib_s = a.messages * a.message_bytes / secs / (1 << 20)
    print(f"max rate: {max_rate:.0f} msg/s, {mib_s:.2f} MiB/s, errors {errors[0]}", file=sys.stderr)

    # Phase 2: latency at a fixed rate (paced per millisecond step; no coordinated omission
    # from the client side beyond librdkafka's own queueing, which the latency includes).
    rate = max(1.0, max_rate * a.latency_rate_fraction)
    lat = []
    def on_lat(err, msg):
        if err:
            errors[0] += 1
        else:
            lat.append(msg.latency() * 1000.0)
    start = time.perf_counter()
    sent = 0
    while True:
        now = time.perf_counter() - start
        if now >= a.latency_seconds:
            break
        due = int(now * rate)
        while sent < due:
            try:
                p.produce(a.topic, value=payload, on_delivery=on_lat)
                sent += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        time.sleep(0.0005)
    p.flush(60)
    lat.sort()
    out = {
        "driver": "confluent-kafka (librdkafka %s)" % __import__("confluent_kafka").libversion()[0],
        "message_bytes": a.message_bytes,
        "partitions": a.partitions,
        "acks": "all",
        "max_rate_msgs_per_s": round(max_rate),
        "max_rate_mib_per_s": round(mib_s, 2),
        "latency_rate_msgs_per_s": round(rate),
        "latency_ms_p50": round(percentile(lat, 0.50), 3),
        "latency_ms_p99": round(percentile(lat, 0.99), 3),
        "latency_ms_p999": round(percentile(lat, 0.999), 3),
        "latency_samples": len(lat),
        "errors": errors[0],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
