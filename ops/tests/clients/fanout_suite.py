#!/usr/bin/env python3
"""Fan-out end to end with confluent-kafka: children declared by topic configs receive every
parent record (keys, values, per-key order), a delay child never early and within delay + 1.5 s,
refusals, and detach + re-attach replays nothing. usage: fanout_suite.py BOOTSTRAP"""
import json, sys, time
from collections import defaultdict
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigEntry, AlterConfigOpType, NewTopic

bs = sys.argv[1]
admin = AdminClient({"bootstrap.servers": bs})
DELAY_S = 2.0

def create(name, partitions, config=None):
    f = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})])[name]
    f.result(30)

def refused(name, partitions, config, want):
    try:
        create(name, partitions, config)
    except KafkaException as e:
        err = e.args[0]
        assert err.name() == want, f"{name}: want {want}, got {err.name()}: {err.str()}"
        return err.str()
    raise AssertionError(f"{name} with {config} was accepted")

def alter(topic, ops):
    res = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    admin.incremental_alter_configs([res])[res].result(30)

def consume(topic, partitions, expect, timeout_s=30):
    c = Consumer({"bootstrap.servers": bs, "group.id": "fanout-test-" + topic, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, deadline = [], time.time() + timeout_s
    while len(out) < expect and time.time() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        out.append((m.key().decode(), m.value().decode(), m.partition(), time.time()))
    c.close()
    return out

create("orders", 3)
create("orders-copy", 2, {"fanout.parent": "orders"})
create("orders-late", 3, {"fanout.parent": "orders", "fanout.delay.ms": str(int(DELAY_S * 1000))})
time.sleep(1.5)  # the reconcilers (1 s) start the cursors

p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
sent, acked = {}, {}
def on_ack(err, msg):
    assert err is None, err
    acked[msg.value().decode()] = time.time()
N = 600
for i in range(N):
    v = f"v{i:05d}"
    sent[v] = time.time()
    p.produce("orders", key=f"k{i % 13}", value=v, on_delivery=on_ack)
    p.poll(0)
p.flush(30)
assert len(acked) == N

# A normal child: every record, same keys and values, per-key order kept, child's partitioner.
copy = consume("orders-copy", 2, N)
assert len(copy) >= N, f"orders-copy has {len(copy)} of {N}"
assert {v for _, v, _, _ in copy} == set(sent), "every parent record, no stranger"
per_key, part_of_key = defaultdict(list), {}
for k, v, part, _ in copy:
    per_key[k].append(v)
    assert part_of_key.setdefault(k, part) == part, f"key {k} on one child partition"
for k, vs in per_key.items():
    assert vs == sorted(vs), f"per-key order kept for {k}"

# A delay child: never before commit + delay, all within delay + 1.5 s (+ fetch slack).
late = consume("orders-late", 3, N, timeout_s=30)
assert {v for _, v, _, _ in late} == set(sent), f"orders-late has {len(late)} of {N}"
early = [v for _, v, _, t in late if t - sent[v] < DELAY_S]
assert not early, f"{len(early)} records arrived before their delay: {early[:5]}"
lateness = sorted(t - acked[v] - DELAY_S for _, v, _, t in late)
assert lateness[-1] <= 1.5 + 0.5, f"max lateness {lateness[-1]:.3f} s"

# Refusals, each with its error.
try:
    p2 = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0})
    errs = []
    p2.produce("orders-late", value="x", on_delivery=lambda e, m: errs.append(e))
    p2.flush(10)
    assert errs and errs[0] is not None and errs[0].name() == "POLICY_VIOLATION", errs
except KafkaException as e:
    raise
refused("orphan", 1, {"fanout.parent": "missing-parent"}, "UNKNOWN_TOPIC_OR_PART")
refused("chain", 1, {"fanout.parent": "orders-copy"}, "INVALID_CONFIG")
refused("too-late", 1, {"fanout.parent": "orders", "fanout.delay.ms": str(400 * 24 * 3600 * 1000)}, "INVALID_CONFIG")
create("short", 1, {"retention.ms": "3600000"})
refused("short-late", 1, {"fanout.parent": "short", "fanout.delay.ms": "60000"}, "INVALID_CONFIG")
# Lowering a parent's retention below delay + 1 h is refused.
try:
    alter("orders", [("retention.ms", "60000", AlterConfigOpType.SET)])
    raise AssertionError("lowering the parent's retention below the floor was accepted")
except KafkaException as e:
    assert e.args[0].name() == "INVALID_CONFIG", e

# Detach, produce, re-attach, produce: nothing from the detached window, nothing replayed.
alter("orders-copy", [("fanout.parent", None, AlterConfigOpType.DELETE)])
time.sleep(1.5)
for i in range(50):
    p.produce("orders", key="gap", value=f"gap{i:03d}")
p.flush(30)
alter("orders-copy", [("fanout.parent", "orders", AlterConfigOpType.SET)])
time.sleep(1.5)
for i in range(50):
    p.produce("orders", key="after", value=f"after{i:03d}")
p.flush(30)
again = consume("orders-copy", 2, N + 50, timeout_s=20)
vals = [v for _, v, _, _ in again]
assert not any(v.startswith("gap") for v in vals), "records produced while detached are not copied"
assert sum(v.startswith("after") for v in vals) == 50, "records after re-attach are copied once"
assert sum(v.startswith("v") for v in vals) == N, "re-attach replays nothing"
print(json.dumps({"copied": len(copy), "delayed": len(late), "lateness_p99_s": round(lateness[int(0.99 * (len(lateness) - 1))], 3), "max_lateness_s": round(lateness[-1], 3)}))
