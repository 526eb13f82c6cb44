#!/usr/bin/env python3
"""confluent-kafka over SASL_PLAINTEXT (SASL_SSL when $SASL_CHECK_CA names the CA file)
against a ringlog SASL listener (issue #19).

  sasl_check.py roundtrip BOOTSTRAP MECHANISM USER PASSWORD TOPIC [PARTITIONS]
      Creates TOPIC (1 partition, or PARTITIONS), produces 100 records (acks=all) to each,
      reads them back; prints a JSON summary ({"ok": true, ..., "broker_ports": [...]}, the
      ports Metadata gave); exits 1 on any failure.
  sasl_check.py refused BOOTSTRAP MECHANISM USER PASSWORD
      Expects the authentication to fail; prints "refused: <error>"; exits 1 if it succeeded.
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
