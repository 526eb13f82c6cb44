#!/usr/bin/env python3
"""confluent-kafka (librdkafka) transactions against a ringlog broker (issue #14).

usage: txn_suite.py BOOTSTRAP

- commit and abort: a transactional producer writes to 3 partitions (spread over the cores),
  commits one transaction and aborts the next, alternating; a read_committed consumer sees
  exactly the committed records (and the LSO reaches the end), a read_uncommitted one sees all.
- consume-transform-produce: a loop reads an input topic in a group and writes each record to
  an output topic with send_offsets_to_transaction, committing every few records and aborting
  one batch on purpose (rewinding to the committed offsets); the output holds every input
  record exactly once, and the group's committed offset is the input's end.
- fencing: a second producer with the same transactional.id fences the first, whose next
  transactional call fails fatally.

Prints a JSON summary on success; exits 1 with "FAIL: step: detail" on stderr otherwise.
"""
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from suite import SUMMARY, fail, step, check
SUMMARY.update({"client": "confluent-kafka"})


def create(admin, name, partitions):
    futs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for _, f in futs.items():
        f.result(30)


def txn_producer(bootstrap, tid):
    return Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "transaction.timeout.ms": 30000,
        "linger.ms": 5,
    })


def drain(bootstrap, topic, partitions, isolation, expect_at_least, timeout_s=30):
    """Every record of `topic` from offset 0, by assign(); returns values per partition."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"drain-{uuid.uuid4().hex[:6]}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    eof = set()
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            if len(eof) == partitions and sum(len(v) for v in got.values()) >= expect_at_least:
                break
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                if len(eof) == partitions and sum(len(v) for v in got.values()) >= expect_at_least:
                    break
                continue
            fail(f"consume {topic} ({isolation}): {m.error()}")
        eof.discard(m.partition())
        got[m.partition()].append(m.value().decode())
    c.close()
    return got


def commit_and_abort(bootstrap, admin):
    step("commit and abort across 3 partitions")
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create(admin, topic, 3)
    p = txn_producer(bootstrap, f"tid-{topic}")
    p.init_transactions(30)
    committed, aborted = [], []
    rounds = 6
    per = 30
    for r in range(rounds):
        p.begin_transaction()
        vals = [f"r{r}-{i}" for i in range(per)]
        for i, v in enumerate(vals):
            p.produce(topic, value=v, partition=i % 3)
        p.flush(30)
        if r % 2 == 0:
            p.commit_transaction(30)
            committed += vals
        else:
            p.abort_transaction(30)
            aborted += vals
    # An aborted transaction written last: read_committed must still reach the end.
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"tail-{i}", partition=i % 3)
    p.flush(30)
    p.abort_transaction(30)
    aborted += [f"tail-{i}" for i in range(5)]

    rc = drain(bootstrap, topic, 3, "read_committed", len(committed))
    seen = [v for vs in rc.values() for v in vs]
    check(sorted(seen) == sorted(committed),
          f"read_committed saw {len(seen)} records, want the {len(committed)} committed; "
          f"aborted among them: {len(set(seen) & set(aborted))}")
    for part, vs in rc.items():
        check(len(vs) == len(set(vs)), f"partition {part}: duplicates under read_committed")
    ru = drain(bootstrap, topic, 3, "read_uncommitted", len(committed) + len(aborted))
    seen_all = [v for vs in ru.values() for v in vs]
    check(sorted(seen_all) == sorted(committed + aborted),
          f"read_uncommitted saw {len(seen_all)}, want {len(committed) + len(aborted)}")
    # The last stable offset is the end: a read_committed watermark query agrees.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": "read_committed"})
    for part in range(3):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        check(hi > 0, f"partition {part}: high watermark {hi}")
    c.close()
    SUMMARY["committed"] = len(committed)
    SUMMARY["aborted"] = len(aborted)
    p.flush(10)


def consume_transform_produce(bootstrap, admin):
    step("consume-transform-produce with send_offsets_to_transaction")
    src = f"ctp-in-{uuid.uuid4().hex[:8]}"
    dst = f"ctp-out-{uuid.uuid4().hex[:8]}"
    create(admin, src, 2)
    create(admin, dst, 2)
    n = 400
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        plain.produce(src, value=f"m{i}", partition=i % 2)
    plain.flush(30)
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    consumer.subscribe([src])
    p = txn_producer(bootstrap, f"tid-{group}")
    p.init_transactions(30)
    done = 0
    batches = 0
    aborted_once = False
    deadline = time.time() + 90
    while done < n and time.time() < deadline:
        msgs = consumer.consume(num_messages=50, timeout=1.0)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, value=m.value().decode().upper(), partition=m.partition())
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                      consumer.consumer_group_metadata(), 30)
        batches += 1
        if batches == 3 and not aborted_once:
            # Abort one batch on purpose: its output disappears and its input is read again.
            p.abort_transaction(30)
            aborted_once = True
            committed = consumer.committed(consumer.assignment(), timeout=10)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        p.commit_transaction(30)
        done += len(msgs)
    check(done == n, f"transformed {done} of {n} records in time")
    committed = consumer.committed([TopicPartition(src, 0), TopicPartition(src, 1)], timeout=10)
    total = sum(tp.offset for tp in committed)
    check(total == n, f"the group's committed offsets add up to {total}, want {n}")
    consumer.close()
    out = drain(bootstrap, dst, 2, "read_committed", n)
    vals = sorted(v for vs in out.values() for v in vs)
    want = sorted(f"M{i}" for i in range(n))
    check(vals == want, f"output holds {len(vals)} records ({len(set(vals))} distinct), want each of {n} once")
    SUMMARY["transformed"] = n


def fencing(bootstrap, admin):
    step("a second producer with the same transactional.id fences the first")
    topic = f"fence-{uuid.uuid4().hex[:8]}"
    create(admin, topic, 1)
    tid = f"tid-{topic}"
    a = txn_producer(bootstrap, tid)
    a.init_transactions(30)
    a.begin_transaction()
    a.produce(topic, value="from-a")
    a.flush(30)
    b = txn_producer(bootstrap, tid)
    b.init_transactions(30)  # aborts a's open transaction and bumps the epoch
    b.begin_transaction()
    b.produce(topic, value="from-b")
    b.commit_transaction(30)
    fenced = False
    try:
        a.produce(topic, value="late-a")
        a.commit_transaction(30)
    except KafkaException as e:
        err = e.args[0]
        fenced = err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                               KafkaError.INVALID_PRODUCER_EPOCH)
        SUMMARY["fenced_error"] = str(err)
    check(fenced, "the fenced producer's commit did not fail")
    rc = drain(bootstrap, topic, 1, "read_committed", 1)
    check(rc[0] == ["from-b"], f"read_committed sees {rc[0]}, want only from-b")


def main():
    bootstrap = sys.argv[1]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    commit_and_abort(bootstrap, admin)
    consume_transform_produce(bootstrap, admin)
    fencing(bootstrap, admin)
    SUMMARY["ok"] = True
    print(json.dumps(SUMMARY))


if __name__ == "__main__":
    main()
