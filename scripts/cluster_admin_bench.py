"""Metastore writes through one node (issue #17's benchmark): CreateTopics of one-partition
topics, one request at a time, sent to BROKER itself (raw Kafka protocol on one connection:
a client library would send them to the controller), then DeleteTopics of them. Prints one
JSON line: creates/s and deletes/s. Every answer must carry error code 0.

usage: cluster_admin_bench.py BROKER COUNT PREFIX
"""
import json
import socket
import struct
import sys
import time


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Conn:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")
        self.corr = 0

    def call(self, api_key, version, body):
        self.corr += 1
        msg = struct.pack(">hhi", api_key, version, self.corr) + kstr("cluster-bench") + body
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        n = struct.unpack(">i", self.f.read(4))[0]
        resp = self.f.read(n)
        assert struct.unpack(">i", resp[:4])[0] == self.corr, "correlation id"
        return resp[4:]


def create(c, name):
    # CreateTopics v4: topics [name, partitions, replication, assignments [], configs []],
    # timeout_ms, validate_only.
    body = struct.pack(">i", 1) + kstr(name) + struct.pack(">ihii", 1, 1, 0, 0) \
        + struct.pack(">ib", 30_000, 0)
    r = c.call(19, 4, body)
    # throttle, [name, error_code, error_message]
    (name_len,) = struct.unpack(">h", r[8:10])
    (code,) = struct.unpack(">h", r[10 + name_len:12 + name_len])
    assert code == 0, f"create {name}: error {code}"


def delete(c, name):
    # DeleteTopics v3: [names], timeout_ms -> throttle, [name, error_code]
    r = c.call(20, 3, struct.pack(">i", 1) + kstr(name) + struct.pack(">i", 30_000))
    (name_len,) = struct.unpack(">h", r[8:10])
    (code,) = struct.unpack(">h", r[10 + name_len:12 + name_len])
    assert code == 0, f"delete {name}: error {code}"


def main():
    broker, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    c = Conn(broker)
    names = [f"{prefix}-{i}" for i in range(count)]
    t0 = time.perf_counter()
    for n in names:
        create(c, n)
    created = time.perf_counter() - t0
    t0 = time.perf_counter()
    for n in names:
        delete(c, n)
    deleted = time.perf_counter() - t0
    print(json.dumps({"broker": broker, "count": count,
                      "creates_per_s": round(count / created, 1),
                      "deletes_per_s": round(count / deleted, 1)}))


main()
