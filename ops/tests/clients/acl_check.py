#!/usr/bin/env python3
"""ACLs over SASL_PLAINTEXT with confluent-kafka (issue #19).

usage: acl_check.py BOOTSTRAP PASSWORD
Users admin (a super user), reader and team, all with PASSWORD (SCRAM-SHA-512), must exist.
- admin creates topics "orders" and "secret", and ACLs: reader may READ "orders" (literal)
  and READ groups prefixed "g-"; team may do ALL on topics prefixed "team-" and READ groups
  prefixed "team-".
- reader consumes "orders" in group "g-1"; its produce to "orders" is refused
  (TOPIC_AUTHORIZATION_FAILED); Metadata hides "secret" from it, and names it refused when
  asked for by name; a group outside "g-" is refused (GROUP_AUTHORIZATION_FAILED).
- team creates "team-a", produces and consumes there; its create of "other" is refused.
- admin describes the ACLs (4), deletes reader's, and reader's read is refused from then on.
Prints a JSON summary; exits 1 with "FAIL: step: detail" otherwise.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, NewTopic, ResourcePatternType,
                                   ResourceType)

bootstrap, password = sys.argv[1], sys.argv[2]


def conf(user):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def fail(step, detail):
    print(f"FAIL: {step}: {detail}", file=sys.stderr)
    sys.exit(1)


def produce(user, topic, n):
    p = Producer({**conf(user), "acks": "all", "message.timeout.ms": 10000})
    errors = []
    for i in range(n):
        p.produce(topic, value=f"{user}-{i}".encode(), partition=0,
                  on_delivery=lambda err, m: errors.append(err) if err else None)
    p.flush(20)
    return errors


def consume(user, topic, group, n, commit=False):
    c = Consumer({**conf(user), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, errors = [], []
    deadline = time.time() + 15
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error())
            if m.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                    KafkaError.GROUP_AUTHORIZATION_FAILED):
                break
            continue
        got.append(m.value().decode())
    if commit and got:
        # A committed offset keeps the group after its members leave.
        c.commit(asynchronous=False)
    c.close()
    return got, errors


admin = AdminClient(conf("admin"))
for t in ("orders", "secret"):
    admin.create_topics([NewTopic(t, 1, 1)])[t].result(timeout=30)
if produce("admin", "orders", 20):
    fail("admin produce", "refused")
acls = [
    AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:reader", "*",
               AclOperation.READ, AclPermissionType.ALLOW),
    AclBinding(ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED, "User:reader", "*",
               AclOperation.READ, AclPermissionType.ALLOW),
    AclBinding(ResourceType.TOPIC, "team-", ResourcePatternType.PREFIXED, "User:team", "*",
               AclOperation.ALL, AclPermissionType.ALLOW),
    AclBinding(ResourceType.GROUP, "team-", ResourcePatternType.PREFIXED, "User:team", "*",
               AclOperation.READ, AclPermissionType.ALLOW),
]
for f in admin.create_acls(acls).values():
    f.result(timeout=30)

got, errors = consume("reader", "orders", "g-1", 20, commit=True)
if len(got) != 20:
    fail("reader consumes orders", f"{len(got)} records, errors {errors}")
errors = produce("reader", "orders", 1)
if not errors or errors[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
    fail("reader produces to orders", f"want TOPIC_AUTHORIZATION_FAILED, got {errors}")
reader_admin = AdminClient(conf("reader"))
listed = reader_admin.list_topics(timeout=10).topics
if "secret" in listed or "orders" not in listed:
    fail("reader's metadata", f"lists {sorted(listed)}")
named = reader_admin.list_topics(topic="secret", timeout=10).topics["secret"]
if named.error is None or named.error.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
    fail("reader asks for secret by name", named.error)
got, errors = consume("reader", "orders", "other-group", 1)
if got or not any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors):
    fail("reader in a group outside g-", f"got {got}, errors {errors}")

# Group administration: reader may describe g-1 (READ implies DESCRIBE), not other-group;
# it lists only the groups it may describe, and may not delete (no DELETE).
described = reader_admin.describe_consumer_groups(["g-1", "other-group"])
described["g-1"].result(timeout=30)
try:
    described["other-group"].result(timeout=30)
    fail("reader describes other-group", "allowed")
except KafkaException as e:
    if e.args[0].code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
        fail("reader describes other-group", e)
listed = [g.group_id for g in reader_admin.list_consumer_groups().result(timeout=30).valid]
if "g-1" not in listed or "other-group" in listed:
    fail("reader lists groups", listed)
try:
    reader_admin.delete_consumer_groups(["g-1"])["g-1"].result(timeout=30)
    fail("reader deletes g-1", "allowed")
except KafkaException as e:
    if e.args[0].code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
        fail("reader deletes g-1", e)

team = AdminClient(conf("team"))
team.create_topics([NewTopic("team-a", 1, 1)])["team-a"].result(timeout=30)
if produce("team", "team-a", 10):
    fail("team produces to team-a", "refused")
got, _ = consume("team", "team-a", "team-group", 10)
if len(got) != 10:
    fail("team consumes team-a", f"{len(got)} records")
try:
    team.create_topics([NewTopic("other", 1, 1)])["other"].result(timeout=30)
    fail("team creates other", "allowed")
except KafkaException as e:
    if e.args[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
        fail("team creates other", e)

any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
described = admin.describe_acls(any_filter).result(timeout=30)
if len(described) != 4:
    fail("describe acls", described)
reader_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:reader",
                                 None, AclOperation.ANY, AclPermissionType.ANY)
deleted = [b for f in admin.delete_acls([reader_filter]).values() for b in f.result(timeout=30)]
if len(deleted) != 2:
    fail("delete reader's acls", deleted)
got, errors = consume("reader", "orders", "g-2", 1)
if got:
    fail("reader after its ACLs went", f"read {got}")
print(json.dumps({"ok": True, "acls_described": len(described), "acls_deleted": len(deleted)}))
