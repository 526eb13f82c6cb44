"""Round-trip floors of this machine (issue #21), at a fixed rate, one request at a time,
no client library:

  echo HOST:PORT? RATE SECS       a TCP echo through a forked Python process (loopback and
                                  wake-up cost alone; HOST:PORT is ignored, pass -)
  produce HOST:PORT TOPIC RATE SECS
                                  Kafka Produce v7 (acks=-1, one 1 KiB record) to one
                                  broker, partition 0: the broker's share plus loopback

Prints one line with p50 / p99 / p99.9 in ms.
"""
import os
import socket
import struct
import sys
import time

CASTAGNOLI = 0x82F63B78


def crc32c(data, table=[]):
    if not table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ CASTAGNOLI if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def record_batch(value, ts):
    rec = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    rec = varint(len(rec)) + rec
    after_crc = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + rec
    body = struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def paced(rate, secs, once):
    lat = []
    period = 1.0 / rate
    nxt = time.perf_counter()
    end = nxt + secs
    while nxt < end:
        while time.perf_counter() < nxt:
            pass
        t0 = time.perf_counter()
        once()
        lat.append(time.perf_counter() - t0)
        nxt += period
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    return f"{len(lat)} round trips: p50 {q(0.5):.3f} p99 {q(0.99):.3f} p99.9 {q(0.999):.3f} ms"


def echo(rate, secs):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    if os.fork() == 0:
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            d = c.recv(65536)
            if not d:
                os._exit(0)
            c.sendall(d[:64])
    s = socket.create_connection(srv.getsockname())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * 1100

    def once():
        s.sendall(msg)
        s.recv(65536)

    print("echo", paced(rate, secs, once))


def produce(addr, topic, rate, secs):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    b = record_batch(b"x" * 1024, int(time.time() * 1000))
    body = struct.pack(">hhi", -1, -1, 30000) + struct.pack(">i", 1) + kstr(topic) \
        + struct.pack(">ii", 1, 0) + struct.pack(">i", len(b)) + b
    corr = [0]

    def once():
        corr[0] += 1
        msg = struct.pack(">hhi", 0, 7, corr[0]) + kstr("floor-probe") + body
        s.sendall(struct.pack(">i", len(msg)) + msg)
        n = struct.unpack(">i", f.read(4))[0]
        resp = f.read(n)
        assert struct.unpack(">i", resp[:4])[0] == corr[0], "correlation id"

    print(f"produce {addr}", paced(rate, secs, once))


if sys.argv[1] == "echo":
    echo(int(sys.argv[3]), float(sys.argv[4]))
else:
    produce(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
