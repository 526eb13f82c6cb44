#!/usr/bin/env python3
"""SASL/OAUTHBEARER against ringlog (issue #19), with confluent-kafka.

  oauth_check.py keys DIR
      Makes two RSA keys with openssl (DIR/good.pem, DIR/other.pem) and DIR/jwks.json holding
      the public half of good.pem only (kid "k1").
  oauth_check.py run BOOTSTRAP DIR
      As alice with librdkafka's own unsecured token (alg none; the broker allows them and
      makes alice a super user): creates a topic, lets User:bob read and write it (an ACL),
      produces and reads back. As bob with an RS256 token signed by good.pem: produces and
      reads back. A token signed by other.pem, an expired one and one with a bad signature
      are refused. Prints a JSON summary ending {"ok": true}; exits 1 on any failure.
"""
import base64
import json
import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

TOPIC = "oauth-t"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def keys(d):
    for name in ("good", "other"):
        subprocess.run(["openssl", "genrsa", "-out", os.path.join(d, f"{name}.pem"), "2048"],
                       check=True, capture_output=True)
    out = subprocess.run(["openssl", "rsa", "-in", os.path.join(d, "good.pem"), "-noout",
                          "-modulus"], check=True, capture_output=True, text=True).stdout
    n = bytes.fromhex(out.strip().split("=", 1)[1])
    jwks = {"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
                      "n": b64u(n), "e": b64u((65537).to_bytes(3, "big"))}]}
    with open(os.path.join(d, "jwks.json"), "w") as f:
        json.dump(jwks, f)


def signed(d, key, claims):
    head = b64u(json.dumps({"alg": "RS256", "kid": "k1", "typ": "JWT"}).encode())
    body = b64u(json.dumps(claims).encode())
    data = f"{head}.{body}".encode()
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", os.path.join(d, f"{key}.pem")],
                         input=data, check=True, capture_output=True).stdout
    return f"{head}.{body}.{b64u(sig)}"


def unsecured_conf(bootstrap, principal):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal}"}


def token_conf(bootstrap, token, expiry):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _cfg: (token, expiry)}


def roundtrip(conf, tag):
    p = Producer(dict(conf, acks="all"))
    errors = []
    for i in range(20):
        p.produce(TOPIC, f"{tag}-{i}".encode(),
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
    left = p.flush(30)
    if left or errors:
        fail(f"{tag}: {left} unsent, errors {errors[:3]}")
    c = Consumer(dict(conf, **{"group.id": f"g-{tag}", "enable.auto.commit": False}))
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    deadline = time.time() + 30
    while time.time() < deadline and len([v for v in got if v.startswith(tag)]) < 20:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    mine = [v for v in got if v.startswith(f"{tag}-")]
    if mine != [f"{tag}-{i}" for i in range(20)]:
        fail(f"{tag}: read back {mine}")


def refused(conf, what):
    errors = []
    a = AdminClient(dict(conf, error_cb=lambda e: errors.append(e)))
    try:
        a.list_topics(timeout=8)
    except KafkaException as e:
        errors.append(e)
    a.poll(1)
    if not any("uthentica" in str(e) for e in errors):
        fail(f"{what}: not refused ({errors})")
    return str(errors[0])


def run(bootstrap, d):
    summary = {}
    alice = unsecured_conf(bootstrap, "alice")
    admin = AdminClient(alice)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    acls = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:bob", "*",
                       op, AclPermissionType.ALLOW)
            for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)]
    acls.append(AclBinding(ResourceType.GROUP, "g-bob", ResourcePatternType.LITERAL, "User:bob",
                           "*", AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(acls).values():
        f.result(30)
    roundtrip(alice, "alice")
    summary["unsecured"] = "alice produced and consumed"
    now = int(time.time())
    good = signed(d, "good", {"sub": "bob", "iat": now, "exp": now + 3600})
    roundtrip(token_conf(bootstrap, good, now + 3600), "bob")
    summary["signed"] = "bob produced and consumed"
    # Without its ACLs carol's valid token gets her no further than authentication.
    carol = signed(d, "good", {"sub": "carol", "iat": now, "exp": now + 3600})
    md = AdminClient(token_conf(bootstrap, carol, now + 3600)).list_topics(timeout=10)
    if TOPIC in md.topics:
        fail(f"carol sees {TOPIC} without an ACL")
    forged = signed(d, "other", {"sub": "alice", "iat": now, "exp": now + 3600})
    summary["other_key"] = refused(token_conf(bootstrap, forged, now + 3600), "another key")
    expired = signed(d, "good", {"sub": "bob", "iat": now - 7200, "exp": now - 3600})
    summary["expired"] = refused(token_conf(bootstrap, expired, now + 3600), "expired")
    head, body, sig = good.split(".")
    evil_body = b64u(json.dumps({"sub": "alice", "iat": now, "exp": now + 3600}).encode())
    summary["tampered"] = refused(token_conf(bootstrap, f"{head}.{evil_body}.{sig}", now + 3600),
                                  "tampered")
    summary["ok"] = True
    print(json.dumps(summary))


if __name__ == "__main__":
    if sys.argv[1] == "keys":
        keys(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3])
