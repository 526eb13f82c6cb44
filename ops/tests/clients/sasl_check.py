#!/usr/bin/env python3
"""confluent-kafka over SASL_PLAINTEXT (SASL_SSL when $SASL_CHECK_CA names the CA file)
against a ringlog SASL listener (issue #19).

  sasl_check.py roundtrip BOOTSTRAP MECHANISM USER PASSWORD TOPIC
      Creates TOPIC (1 partition), produces 100 records (acks=all), reads them back; prints a
      JSON summary ({"ok": true, ...}); exits 1 on any failure.
  sasl_check.py refused BOOTSTRAP MECHANISM USER PASSWORD
      Expects the authentication to fail; prints "refused: <error>"; exits 1 if it succeeded.
  sasl_check.py scram-admin BOOTSTRAP MECHANISM USER PASSWORD NEWUSER NEWPASSWORD
      As USER: AlterUserScramCredentials upserts NEWUSER (SCRAM-SHA-256), Describe lists it;
      prints the described mechanisms as JSON.
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
        admin = AdminClient(c)
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        except KafkaException as e:
            fail(f"CreateTopics over SASL: {e}")
        p = Producer({**c, "acks": "all"})
        errors = []
        for i in range(100):
            p.produce(topic, value=f"v{i}".encode(),
                      on_delivery=lambda err, m: errors.append(err) if err else None)
        left = p.flush(30)
        if errors or left:
            fail(f"produce over SASL: {errors[:3]} ({left} undelivered)")
        cons = Consumer({**c, "group.id": "sasl-check", "enable.auto.commit": False})
        cons.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.time() + 30
        while len(got) < 100 and time.time() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
        cons.close()
        if got != [f"v{i}" for i in range(100)]:
            fail(f"read back {len(got)} of 100: {got[:5]}")
        print(json.dumps({"ok": True, "mechanism": mech, "records": len(got)}))
    elif cmd == "refused":
        admin = AdminClient({**c, "error_cb": lambda e: None})
        try:
            md = admin.list_topics(timeout=8)
        except KafkaException as e:
            print(f"refused: {e}")
            return
        fail(f"authenticated with a wrong password: {md.brokers}")
    elif cmd == "scram-admin":
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
