#!/usr/bin/env python3
"""A transactional producer for the crash tests (issue #14).

usage: txn_loop_producer.py BOOTSTRAP TOPIC TID PARTITIONS RECORDS_PER_TXN TIMEOUT_MS [HANG_AFTER]

Runs transactions of RECORDS_PER_TXN records spread over PARTITIONS partitions, values
"TID:TXN:I", and prints "COMMITTED TXN" once commit_transaction returned. With HANG_AFTER, after
that many commits it opens one more transaction, writes (and flushes) its records, prints
"HANGING TXN" and sleeps: the test SIGKILLs it there. Any error ends it with "ERROR ..." (the
broker was killed under it).
"""
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, tid = sys.argv[1], sys.argv[2], sys.argv[3]
partitions, per_txn, timeout_ms = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
hang_after = int(sys.argv[7]) if len(sys.argv) > 7 else None

p = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": tid,
    "transaction.timeout.ms": timeout_ms,
    "linger.ms": 2,
    "message.timeout.ms": timeout_ms,
})
try:
    p.init_transactions(30)
    txn = 0
    while True:
        p.begin_transaction()
        for i in range(per_txn):
            p.produce(topic, value=f"{tid}:{txn}:{i}", partition=i % partitions)
        if hang_after is not None and txn == hang_after:
            p.flush(30)
            print(f"HANGING {txn}", flush=True)
            time.sleep(3600)
        p.commit_transaction(30)
        print(f"COMMITTED {txn}", flush=True)
        txn += 1
except Exception as e:  # the broker was killed under it
    print(f"ERROR {e}", flush=True)
