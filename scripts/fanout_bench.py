#!/usr/bin/env python3
"""Fan-out benchmark (issue #6) against a running broker.

usage: fanout_bench.py BOOTSTRAP BROKER_PID MODE
  MODE=lag:  a parent at a fixed rate (acks=all, 1 KiB) with a normal child and a child delayed
             2 s; prints parent produce latency p50/p99, child lag p50/p99 (consume time - send
             time) and delay lateness p50/p99 (consume time - send time - delay).
  MODE=idle-1 / idle-1m: one / 1,000,000 records pending in a child delayed 1 h; then the
             broker's CPU time (utime+stime from /proc) over 10 s of idleness.
"""
import json, os, sys, threading, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bs, pid, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
admin = AdminClient({"bootstrap.servers": bs})

def create(name, parts, config=None):
    admin.create_topics([NewTopic(name, num_partitions=parts, replication_factor=1, config=config or {})])[name].result(30)

def pct(v, q):
    v = sorted(v)
    return round(v[min(len(v) - 1, int(q * len(v)))] * 1000, 3) if v else None

def cpu_seconds():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

if mode == "lag":
    create("p", 3); create("c", 3, {"fanout.parent": "p"}); create("d", 3, {"fanout.parent": "p", "fanout.delay.ms": "2000"})
    time.sleep(1.5)
    got = {"c": {}, "d": {}}
    def consume(topic):
        c = Consumer({"bootstrap.servers": bs, "group.id": "bench-" + topic, "fetch.wait.max.ms": 10})
        c.assign([TopicPartition(topic, i, 0) for i in range(3)])
        end = time.time() + 40
        while time.time() < end and len(got[topic]) < N:
            m = c.poll(0.1)
            if m is not None and not m.error():
                got[topic][m.value()[:16]] = time.time()
        c.close()
    N, RATE = 20000, 1000
    ts = [threading.Thread(target=consume, args=(t,)) for t in ("c", "d")]
    [t.start() for t in ts]
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 1})
    sent, pub = {}, []
    def cb(err, msg):
        if err is None:
            pub.append(time.time() - sent[msg.value()[:16]])
    t0 = time.time()
    for i in range(N):
        while time.time() < t0 + i / RATE:
            p.poll(0.0005)
        key = b"%016d" % i
        sent[key] = time.time()
        p.produce("p", key=str(i % 50), value=key + b"x" * 1008, on_delivery=cb)
        p.poll(0)
    p.flush(30)
    [t.join() for t in ts]
    lag = [got["c"][k] - s for k, s in sent.items() if k in got["c"]]
    late = [got["d"][k] - s - 2.0 for k, s in sent.items() if k in got["d"]]
    print(json.dumps({"records": N, "rate": RATE, "produce_ms_p50": pct(pub, .5), "produce_ms_p99": pct(pub, .99),
                      "child_lag_ms_p50": pct(lag, .5), "child_lag_ms_p99": pct(lag, .99), "child_received": len(lag),
                      "delay_lateness_ms_p50": pct(late, .5), "delay_lateness_ms_p99": pct(late, .99),
                      "delay_early": sum(1 for x in late if x < 0), "delayed_received": len(late)}))
else:
    n = 1 if mode == "idle-1" else 1_000_000
    create("p", 1, {"retention.ms": str(10 * 3600 * 1000)}); create("d", 1, {"fanout.parent": "p", "fanout.delay.ms": "3600000"})
    time.sleep(1.5)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 20, "batch.num.messages": 10000, "queue.buffering.max.messages": 2000000})
    for i in range(n):
        while True:
            try:
                p.produce("p", value=b"%012d" % i); break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(120)
    time.sleep(3)  # let flushes and the cursors settle
    c0 = cpu_seconds(); time.sleep(10); c1 = cpu_seconds()
    print(json.dumps({"pending_delayed": n, "cpu_seconds_over_10s": round(c1 - c0, 4)}))
