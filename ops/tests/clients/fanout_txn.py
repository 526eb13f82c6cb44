#!/usr/bin/env python3
"""Fan-out copies only committed records (issue #14): a confluent-kafka transactional producer
writes to a parent topic with a fan-out child; one transaction commits, one aborts, one stays
open for a while (plain records produced after it are held back with it) and then commits, and
a last one aborts. A read_uncommitted consumer of the child must see exactly the committed and
plain records, each once, and nothing of the open transaction while it is open.

usage: fanout_txn.py BOOTSTRAP

Prints a JSON summary on success; exits 1 with "FAIL: step: detail" on stderr otherwise.
"""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from suite import check, fail, step

PARENT_PARTITIONS = 2
CHILD_PARTITIONS = 3
# The reconcilers start cursors within 1 s; copies take a slab linger (25 ms) plus a commit.
CURSOR_START_S = 1.5
SETTLE_S = 2.0
TIMEOUT_S = 30.0


bs = sys.argv[1]
admin = AdminClient({"bootstrap.servers": bs})
tag = uuid.uuid4().hex[:8]
parent, child = f"txp-{tag}", f"txc-{tag}"


def create(name, partitions, config=None):
    f = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                      config=config or {})])[name]
    f.result(30)


step("create a parent and its fan-out child")
create(parent, PARENT_PARTITIONS)
create(child, CHILD_PARTITIONS, {"fanout.parent": parent})
time.sleep(CURSOR_START_S)

# The child's records as they arrive, read_uncommitted: what is physically in the child.
reader = Consumer({
    "bootstrap.servers": bs,
    "group.id": f"fanout-txn-{tag}",
    "isolation.level": "read_uncommitted",
    "enable.auto.commit": False,
})
reader.assign([TopicPartition(child, p, 0) for p in range(CHILD_PARTITIONS)])
seen = []


def read_child(want, settle_s=SETTLE_S, timeout_s=TIMEOUT_S):
    """Reads the child until `want` records arrived in all, then `settle_s` longer (to catch
    records that must not arrive)."""
    deadline = time.time() + timeout_s
    settle_end = None
    while time.time() < (settle_end or deadline):
        m = reader.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value().decode())
        if settle_end is None and len(seen) >= want:
            settle_end = time.time() + settle_s
    return list(seen)


tp = Producer({
    "bootstrap.servers": bs,
    "transactional.id": f"tid-{tag}",
    "transaction.timeout.ms": 30000,
    "linger.ms": 5,
})
tp.init_transactions(30)
plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})


def txn(prefix, n, end):
    tp.begin_transaction()
    vals = [f"{prefix}{i:03d}" for i in range(n)]
    for i, v in enumerate(vals):
        tp.produce(parent, key=f"k{i % 7}", value=v, partition=i % PARENT_PARTITIONS)
    tp.flush(30)
    if end == "commit":
        tp.commit_transaction(30)
    elif end == "abort":
        tp.abort_transaction(30)
    return vals


def plain_records(prefix, n):
    vals = [f"{prefix}{i:03d}" for i in range(n)]
    for i, v in enumerate(vals):
        plain.produce(parent, key=f"k{i % 7}", value=v, partition=i % PARENT_PARTITIONS)
    plain.flush(30)
    return vals


step("commit one transaction, abort another, then plain records")
committed = txn("c", 40, "commit")
aborted = txn("a", 40, "abort")
committed += plain_records("p", 10)
got = read_child(len(committed))
check(sorted(got) == sorted(committed),
      f"child holds {len(got)} records, want the {len(committed)} committed; "
      f"aborted among them: {len(set(got) & set(aborted))}")

step("an open transaction holds back itself and the plain records after it")
held = txn("o", 20, "open")
held_plain = plain_records("q", 10)
got = read_child(len(committed), settle_s=3.0)
check(not set(got) & set(held), f"records of the open transaction in the child: "
      f"{sorted(set(got) & set(held))[:5]}")
check(not set(got) & set(held_plain), "plain records after the open transaction were copied "
      "before it ended")
check(sorted(got) == sorted(committed), f"child holds {len(got)}, want {len(committed)}")
held_while_open = True

step("the open transaction commits; a last one aborts")
tp.commit_transaction(30)
committed += held + held_plain
aborted += txn("z", 15, "abort")
got = read_child(len(committed))
reader.close()
check(not set(got) & set(aborted),
      f"aborted records in the child: {sorted(set(got) & set(aborted))[:5]}")
check(len(got) == len(set(got)), "duplicates in the child")
check(sorted(got) == sorted(committed),
      f"child holds {len(got)} records, want the {len(committed)} committed")

print(json.dumps({"committed": len(committed), "aborted": len(aborted),
                  "held_while_open": held_while_open, "child_records": len(got)}))
