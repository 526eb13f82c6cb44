#!/usr/bin/env python3
"""confluent-kafka over SASL_PLAINTEXT (SASL_SSL when $SASL_CHECK_CA names the CA file)
against a ringlog SASL listener (issue #19).

  sasl_check.py roundtrip BOOTSTRAP MECHANISM USER PASSWORD TOPIC [PARTITIONS]
      Creates TOPIC (1 partition, or PARTITIONS), produces 100 records (acks=all) to each,
      reads them back; prints a JSON summary ({"ok": true, ..., "broker_ports": [...]}, the
      ports Metadata gave); exits 1 on any failure.
  sasl_check.py refused BOOTSTRAP MECHANISM USER PASSWORD
      Expects the authentication to fail; prints "refused: <error>"; exits 1 if it succeeded.
  sasl_check.py latency BOOTSTRAP MECHANISM USER PASSWORD TOPIC COUNT
      Creates TOPIC (1 partition) unless it exists, then COUNT times: produces one record
      (acks=all) and waits for its acknowledgement, and polls an assigned consumer until the
      record arrives; checks every record came back in order; prints a JSON summary with the
      acknowledgement and end-to-end latencies (p50, p99, max, in ms).
  sasl_check.py scram-admin BOOTSTRAP MECHANISM USER PASSWORD NEWUSER NEWPASSWORD
      As USER: AlterUserScramCredentials upserts NEWUSER (SCRAM-SHA-256), Describe lists it;
      prints the described mechanisms as JSON. scram-admin-plain: the same over a PLAINTEXT
      listener (MECHANISM, USER and PASSWORD are ignored).
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)


def conf(bootstrap, mech, user, password):
    c = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password}
    ca = os.environ.get("SASL_CHECK_CA")
    if ca:
        # SASL_SSL: the broker's certificate is checked against this CA (and its name).
        c.update({"security.protocol": "SASL_SSL", "ssl.ca.location": ca})
    return c


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    cmd, bootstrap, mech, user, password = sys.argv[1:6]
    c = conf(bootstrap, mech, user, password)
    if cmd == "roundtrip":
        topic = sys.argv[6]
        parts = int(sys.argv[7]) if len(sys.argv) > 7 else 1
        admin = AdminClient(c)
        try:
            admin.create_topics([NewTopic(topic, parts, 1)])[topic].result(timeout=30)
        except KafkaException as e:
            fail(f"CreateTopics over SASL: {e}")
        p = Producer({**c, "acks": "all"})
        errors = []
        want = {q: [f"v{q}-{i}" for i in range(100)] for q in range(parts)}
        for q in range(parts):
            for v in want[q]:
                p.produce(topic, value=v.encode(), partition=q,
                          on_delivery=lambda err, m: errors.append(err) if err else None)
        left = p.flush(30)
        if errors or left:
            fail(f"produce over SASL: {errors[:3]} ({left} undelivered)")
        cons = Consumer({**c, "group.id": "sasl-check", "enable.auto.commit": False})
        cons.assign([TopicPartition(topic, q, 0) for q in range(parts)])
        got = {q: [] for q in range(parts)}
        deadline = time.time() + 30
        while sum(map(len, got.values())) < 100 * parts and time.time() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append(m.value().decode())
        cons.close()
        if got != want:
            fail(f"read back {sum(map(len, got.values()))} of {100 * parts}")
        ports = sorted(b.port for b in admin.list_topics(timeout=10).brokers.values())
        print(json.dumps({"ok": True, "mechanism": mech, "records": 100 * parts,
                          "broker_ports": ports}))
    elif cmd == "latency":
        topic, count = sys.argv[6], int(sys.argv[7])
        admin = AdminClient(c)
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                fail(f"CreateTopics over SASL: {e}")
        p = Producer({**c, "acks": "all", "linger.ms": 0})
        cons = Consumer({**c, "group.id": "latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10})
        start = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
        cons.assign([TopicPartition(topic, 0, start)])
        acks, e2e = [], []
        for i in range(count):
            value = f"lat-{start + i}".encode()
            done = []
            t0 = time.monotonic()
            p.produce(topic, value=value, partition=0,
                      on_delivery=lambda err, m: done.append(err))
            while not done:
                p.poll(0.001)
                if time.monotonic() - t0 > 60:
                    fail(f"record {i}: no acknowledgement in 60 s")
            if done[0] is not None:
                fail(f"record {i}: {done[0]}")
            acks.append(time.monotonic() - t0)
            while True:
                m = cons.poll(1.0)
                if m is not None and m.error() is None:
                    if m.value() != value:
                        fail(f"record {i}: read {m.value()!r}, want {value!r}")
                    break
                if time.monotonic() - t0 > 60:
                    fail(f"record {i}: not read back in 60 s")
            e2e.append(time.monotonic() - t0)
        cons.close()

        def pct(xs, q):
            xs = sorted(xs)
            return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 2)
        print(json.dumps({"ok": True, "records": count,
                          "ack_ms": {"p50": pct(acks, 0.5), "p99": pct(acks, 0.99),
                                     "max": pct(acks, 1.0)},
                          "e2e_ms": {"p50": pct(e2e, 0.5), "p99": pct(e2e, 0.99),
                                     "max": pct(e2e, 1.0)}}))
    elif cmd == "refused":
        admin = AdminClient({**c, "error_cb": lambda e: None})
        try:
            md = admin.list_topics(timeout=8)
        except KafkaException as e:
            print(f"refused: {e}")
            return
        fail(f"authenticated with a wrong password: {md.brokers}")
    elif cmd in ("scram-admin", "scram-admin-plain"):
        if cmd == "scram-admin-plain":
            # Over a PLAINTEXT listener: no SASL settings.
            c = {"bootstrap.servers": bootstrap}
        new_user, new_password = sys.argv[6], sys.argv[7]
        admin = AdminClient(c)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        fs = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(new_user, info, new_password.encode())])
        for f in fs.values():
            f.result(timeout=30)
        described = admin.describe_user_scram_credentials([new_user])[new_user].result(timeout=30)
        mechs = [str(i.mechanism) for i in described.scram_credential_infos]
        print(json.dumps({"ok": True, "user": new_user, "mechanisms": mechs}))
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
