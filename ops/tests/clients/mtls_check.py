#!/usr/bin/env python3
"""confluent-kafka over SSL with client certificates against ringlog (issue #19).

  mtls_check.py BOOTSTRAP CA_PEM DIR
      DIR holds alice.pem/alice.key and bob.pem/bob.key, signed by the broker's client CA.
      As alice (a super user by her certificate's CN): creates a topic, produces and reads
      back. As bob (no ACL): the topic is not in his Metadata. Without a certificate: the
      handshake fails. Prints a JSON summary ending {"ok": true}; exits 1 on any failure.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "mtls-t"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def conf(bootstrap, ca, d, who):
    c = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
    if who:
        c.update({"ssl.certificate.location": os.path.join(d, f"{who}.pem"),
                  "ssl.key.location": os.path.join(d, f"{who}.key")})
    return c


def main():
    bootstrap, ca, d = sys.argv[1:4]
    alice = conf(bootstrap, ca, d, "alice")
    admin = AdminClient(alice)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    p = Producer(dict(alice, acks="all"))
    for i in range(20):
        p.produce(TOPIC, f"m{i}".encode())
    if p.flush(30):
        fail("alice's records not all acknowledged")
    c = Consumer(dict(alice, **{"group.id": "mtls-g", "enable.auto.commit": False}))
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.time() + 30
    while time.time() < deadline and len(got) < 20:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    if got != [f"m{i}" for i in range(20)]:
        fail(f"alice read back {got}")
    bob = AdminClient(conf(bootstrap, ca, d, "bob"))
    md = bob.list_topics(timeout=10)
    if TOPIC in md.topics:
        fail("bob sees the topic without an ACL: his certificate did not make him User:bob")
    errors = []
    anon = AdminClient(dict(conf(bootstrap, ca, d, None), error_cb=lambda e: errors.append(e)))
    try:
        anon.list_topics(timeout=8)
        fail("a client without a certificate got Metadata")
    except KafkaException as e:
        errors.append(e)
    print(json.dumps({"alice": "produced and consumed", "bob": "topic hidden",
                      "no_certificate": str(errors[0]), "ok": True}))


if __name__ == "__main__":
    main()
