#!/usr/bin/env python3
"""Kafka's own CLI tools against ringlog and against a genuine Apache Kafka peer.

usage: peer_tools.py --ringlog HOST:PORT --kafka HOST:PORT
                     [--tool-runner 'scripts/kafka-peer.sh tool']
                     [--differences docs/kafka-differences.md]
                     [--only REGEX] [--jobs N] [--check-timeout S] [--list]

Each check runs the same command lines of Kafka's tools (kafka-topics, kafka-configs,
kafka-consumer-groups, ...; run by the tool runner, `scripts/kafka-peer.sh tool NAME ARGS...`)
against both brokers, the two at once, normalises what legitimately differs between two
brokers (host:port, cluster, topic and producer ids, timestamps, sizes, log-dir paths, column
widths, the order of unordered lists), compares the outcomes, and checks ringlog's answer on
its own (the topic created has its partitions and configs, records come back with their keys
and headers, offsets are reset to where asked, ...): a check asserting only on Kafka's
behaviour would not test ringlog. Both brokers get the same names, unique to the run
(`pt<run>-...`), so that the driver can run again against the same brokers.

A difference that is known and documented is matched by the check's id against
--differences: every line there that starts with "- `CHECK-ID`" lists one. A check prints
  PASS name                    no difference, ringlog right
  DIFF-EXPECTED name: reason   a difference the file lists for this check (its first sentence)
  FAIL name: details           ringlog wrong on its own, an unlisted difference, or a failure
Only the differences a check knows how to recognise are excused by the listing; anything
else that differs fails even for a listed check. At the end:
  expected differences: K (listed in FILE)
  N passed, M failed
(expected differences count as passed) and the exit status is 1 if M > 0.

The peer must run with an authorizer and ANONYMOUS as a super user, or kafka-acls cannot work
on it:
  kafka-peer.sh start single DIR PORT \\
    --prop authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \\
    --prop super.users=User:ANONYMOUS
Exit status: 0 all passed, 1 some failed, 2 bad usage or a broker not answering, 3 the tool
runner says Kafka is unavailable (kafka-peer.sh exits 3).

Python 3.11 standard library only.
"""

import argparse
import datetime
import difflib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

KAFKA, RINGLOG = "kafka", "ringlog"
BROKERS = (KAFKA, RINGLOG)

# The peer's properties that make its answers differ from a default broker's (kafka-peer.sh
# sets them; `kafka-storage format` turns min.insync.replicas into a cluster-wide dynamic
# default, which Kafka then shows on every topic and on the broker default entity).
PEER_ARTIFACT_CONFIGS = {"min.insync.replicas=1"}


# ---------------------------------------------------------------------------------------------
# Running tools
# ---------------------------------------------------------------------------------------------


class Res:
    """One finished tool run."""

    def __init__(self, broker, argv, rc, out, err, secs, timed_out=False):
        self.broker, self.argv, self.rc = broker, argv, rc
        self.out, self.err, self.secs, self.timed_out = out, err, secs, timed_out

    @property
    def both(self):
        return self.out + "\n" + self.err

    def error_class(self):
        """The Kafka error class the tool reported (short name), or None."""
        found = re.findall(r"\b((?:org\.apache\.kafka|java\.lang|java\.util)[\w.]*\.(\w+(?:Exception|Error)))\b",
                           self.both)
        kafka = [s for f, s in found if f.startswith("org.apache.kafka.common.errors.")]
        if kafka:
            return kafka[0]
        others = [s for f, s in found if s != "ExecutionException"]
        return others[0] if others else None

    def summary(self, limit=600):
        text = "\n".join(l for l in self.err.splitlines()
                         if l.strip() and not l.lstrip().startswith("at ")
                         and "KIP-848" not in l and "deprecated" not in l)
        if not text:
            text = self.out
        return f"rc={self.rc} {text.strip()[-limit:]!r}"


class Runner:
    def __init__(self, spec):
        argv = shlex.split(spec)
        if not argv:
            raise SystemExit("peer_tools: empty --tool-runner")
        if os.path.basename(argv[-1]) == "kafka-peer.sh":
            argv.append("tool")
        self.base = argv
        self.lock = threading.Lock()
        self.live = set()  # Popen objects running (killed on exit)
        self.count = 0  # tool runs started

    def spawn(self, tool, args, stdin_path=None):
        argv = self.base + [tool] + list(args)
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, start_new_session=True)
        if stdin_path:
            stdin.close()
        p.argv, p.out, p.err, p.t0 = argv, out, err, time.monotonic()
        with self.lock:
            self.live.add(p)
            self.count += 1
        return p

    def kill(self, p):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()

    def finish(self, broker, p, timeout):
        timed_out = False
        try:
            p.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            self.kill(p)
        with self.lock:
            self.live.discard(p)
        res = []
        for f in (p.out, p.err):
            f.seek(0)
            res.append(f.read().decode("utf-8", "replace"))
            f.close()
        return Res(broker, p.argv, p.returncode, res[0], res[1], time.monotonic() - p.t0, timed_out)

    def run(self, broker, tool, args, stdin=None, timeout=60.0):
        path = None
        if stdin is not None:
            fd, path = tempfile.mkstemp(prefix="peer-tools-stdin-")
            with os.fdopen(fd, "wb") as f:
                f.write(stdin.encode() if isinstance(stdin, str) else stdin)
        try:
            p = self.spawn(tool, args, path)
            return self.finish(broker, p, timeout)
        finally:
            if path:
                os.unlink(path)

    def kill_all(self):
        with self.lock:
            live = list(self.live)
        for p in live:
            self.kill(p)


# ---------------------------------------------------------------------------------------------
# Checks: context, comparison, results
# ---------------------------------------------------------------------------------------------


class CheckAbort(Exception):
    """Stops a check; the reason is already recorded as a problem."""


def one_line(s, limit=400):
    s = " ".join(str(s).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def text_diff(a, b, limit=12):
    a_l = a.splitlines() if isinstance(a, str) else json.dumps(a, indent=1, sort_keys=True).splitlines()
    b_l = b.splitlines() if isinstance(b, str) else json.dumps(b, indent=1, sort_keys=True).splitlines()
    d = [l for l in difflib.unified_diff(a_l, b_l, "kafka", "ringlog", lineterm="", n=0)
         if not l.startswith("@@")]
    return d[:limit] + (["..."] if len(d) > limit else [])


class Ctx:
    def __init__(self, drv, cid):
        self.drv, self.id = drv, cid
        self.problems, self.diffs, self.log = [], [], []
        self.deadline = time.monotonic() + drv.check_timeout

    # names and placeholders -------------------------------------------------------------

    def name(self, suffix):
        return f"pt{self.drv.run_id}-{suffix}"

    def bs(self, b):
        return self.drv.bootstrap[b]

    def fill(self, b, args):
        return [str(a).replace("{bs}", self.bs(b)) for a in args]

    # recording --------------------------------------------------------------------------

    def note(self, msg):
        self.log.append(msg)

    def problem(self, msg):
        self.problems.append(one_line(msg))

    def fail(self, msg):
        self.problem(msg)
        raise CheckAbort()

    def diff(self, desc, detail=None):
        if desc not in self.diffs:
            self.diffs.append(desc)
        if detail:
            self.note(f"difference ({desc}): {detail}")

    def expect(self, b, cond, msg):
        """An assertion on one broker's answer (ringlog's own correctness, or a sanity check
        of the test against Kafka)."""
        if not cond:
            self.problem(f"{b}: {msg}")
        return bool(cond)

    # running ----------------------------------------------------------------------------

    def remaining(self):
        return self.deadline - time.monotonic()

    def tool(self, b, tool, args, stdin=None, ok=True, timeout=60.0):
        left = self.remaining()
        if left <= 1:
            self.fail(f"check timed out ({self.drv.check_timeout:.0f}s) before `{tool}` on {b}")
        res = self.drv.runner.run(b, tool, self.fill(b, args), stdin=stdin, timeout=min(timeout, left))
        self.note(f"[{b} {res.secs:.1f}s rc={res.rc}] {tool} {' '.join(self.fill(b, args))}\n"
                  f"  stdout: {res.out[-3000:]!r}\n  stderr: {res.err[-1500:]!r}")
        if res.timed_out:
            self.fail(f"{b}: `{tool} {' '.join(args)}` timed out after {min(timeout, left):.0f}s: "
                      f"{res.summary()}")
        if ok and res.rc != 0:
            self.fail(f"{b}: `{tool} {' '.join(args)}` failed: {res.summary()}")
        return res

    def per_broker(self, fn):
        """fn(b) for both brokers at once; returns {b: result}. A CheckAbort in either aborts."""
        results, errors = {}, {}

        def go(b):
            try:
                results[b] = fn(b)
            except CheckAbort as e:
                errors[b] = e
            except Exception as e:  # noqa: BLE001 - reported as a driver error
                errors[b] = e
                self.note(traceback.format_exc())

        threads = [threading.Thread(target=go, args=(b,), daemon=True) for b in BROKERS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for b in BROKERS:
            e = errors.get(b)
            if isinstance(e, CheckAbort):
                raise e
            if e is not None:
                self.fail(f"driver error on {b}: {type(e).__name__}: {e}")
        return results

    def both(self, tool, args, stdin=None, ok=True, timeout=60.0):
        """The same tool command against both brokers at once ({bs}: the broker's address)."""
        return self.per_broker(lambda b: self.tool(b, tool, args, stdin=stdin, ok=ok, timeout=timeout))

    # comparing --------------------------------------------------------------------------

    def same(self, what, k, r, allow=()):
        """Kafka's (normalised) answer `k` against ringlog's `r`. `allow`: (description,
        function) pairs, each a documented difference: the function maps either answer to a
        form where that difference is gone. Differences left over are problems; the allowances
        that were needed are recorded as differences (listed ones pass as DIFF-EXPECTED)."""
        if k == r:
            return True
        allow = list(allow)

        def apply(skip):
            kk, rr = k, r
            for i, (_, f) in enumerate(allow):
                if i != skip:
                    kk, rr = f(kk), f(rr)
            return kk, rr

        kk, rr = apply(None)
        if kk != rr:
            d = text_diff(kk, rr)
            self.note(f"{what} differs:\n" + "\n".join(d))
            self.problem(f"{what} differs (-kafka +ringlog): " + " | ".join(d))
            return False
        needed = [desc for i, (desc, _) in enumerate(allow) if apply(i)[0] != apply(i)[1]]
        if not needed:  # several allowances each covering the difference
            needed = [desc for desc, f in allow if f(k) != k or f(r) != r]
        for desc in needed:
            self.diff(desc, f"{what}: " + " | ".join(text_diff(k, r)))
        return True


class Fixture:
    """Data a lane of checks shares, made once (per run) on both brokers."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn
        self.lock = threading.Lock()
        self.done, self.value, self.error, self.log = False, None, None, []

    def get(self, drv, ctx):
        with self.lock:
            if not self.done:
                fctx = Ctx(drv, f"fixture.{self.name}")
                try:
                    self.value = self.fn(fctx)
                    if fctx.problems:
                        self.error = "; ".join(fctx.problems)
                except CheckAbort:
                    self.error = "; ".join(fctx.problems) or "aborted"
                except Exception as e:  # noqa: BLE001
                    self.error = f"driver error: {type(e).__name__}: {e}"
                    fctx.note(traceback.format_exc())
                self.log = fctx.log
                self.done = True
                if self.error:
                    drv.emit_log(f"fixture.{self.name}", self.log)
        if self.error:
            ctx.fail(f"fixture {self.name} failed: {self.error}")
        return self.value


# ---------------------------------------------------------------------------------------------
# Normalisation and parsing helpers
# ---------------------------------------------------------------------------------------------

TS_RE = re.compile(r"\b1[5-9]\d{11}\b")  # epoch milliseconds (2017..2033)


def norm(ctx, b, text):
    """What differs between any two brokers: the address, the cluster id, topic ids,
    timestamps in epoch ms."""
    text = text.replace(ctx.bs(b), "BROKER")
    cid = ctx.drv.cluster_id.get(b)
    if cid:
        text = text.replace(cid, "CLUSTER-ID")
    text = re.sub(r"(TopicId:\s*)\S+", r"\1TOPIC-ID", text)
    text = TS_RE.sub("TS", text)
    return text


def squeeze(text):
    """Column widths depend on the longest value: collapse runs of blanks, drop blank lines."""
    return "\n".join(" ".join(l.split()) for l in text.splitlines() if l.strip())


def sorted_lines(text):
    return "\n".join(sorted(l for l in text.splitlines() if l.strip()))


def table(text):
    """A whitespace-aligned table (kafka-consumer-groups, kafka-transactions) as a list of
    dicts, header names as keys. Blank and non-table lines before the header are skipped."""
    lines = [l for l in text.splitlines() if l.strip()]
    for i, l in enumerate(lines):
        cols = l.split()
        if cols and cols[0] in ("GROUP", "TOPIC", "TransactionalId", "CoordinatorId", "ProducerId", "Topic",
                                "NodeId"):
            rows = []
            for r in lines[i + 1:]:
                vals = r.split()
                if len(vals) < len(cols):
                    vals += [""] * (len(cols) - len(vals))
                rows.append(dict(zip(cols, vals)))
            return rows
    return []


def parse_topic_describe(text):
    """kafka-topics --describe: {topic: {"PartitionCount": .., "Configs": {k: v}, "partitions":
    {p: fields}}}."""
    topics = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = {}
        for part in line.strip().split("\t"):
            k, _, v = part.partition(":")
            fields[k.strip()] = v.strip()
        t = fields.get("Topic")
        if "PartitionCount" in fields:
            cfg = {}
            for kv in filter(None, fields.get("Configs", "").split(",")):
                k, _, v = kv.partition("=")
                cfg[k] = v
            topics[t] = {"PartitionCount": fields["PartitionCount"],
                         "ReplicationFactor": fields.get("ReplicationFactor"),
                         "Configs": cfg, "partitions": {}}
        elif "Partition" in fields and t in topics:
            topics[t]["partitions"][int(fields["Partition"])] = fields
    return topics


def parse_config_describe(text):
    """kafka-configs --describe (topics, brokers): {key: value}."""
    cfg = {}
    for line in text.splitlines():
        m = re.match(r"^\s+([\w.]+)=(.*?) sensitive=(true|false) synonyms=\{.*\}\s*$", line)
        if m:
            cfg[m.group(1)] = m.group(2)
    return cfg


def parse_quota_describe(text):
    """kafka-configs --describe --entity-type users/clients: {entity: {key: float}}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^Quota configs for (.*) are (.*)$", line.strip())
        if m:
            vals = {}
            for kv in m.group(2).split(", "):
                k, _, v = kv.partition("=")
                vals[k.strip()] = float(v)
            out[m.group(1)] = vals
    return out


def sorted_scram(text):
    """Each SCRAM credential line with its mechanisms sorted: the order is not part of the
    answer (Kafka's follows its own map, ringlog's the mechanism's number)."""
    def one(line):
        m = re.match(r"^(SCRAM credential configs for user-principal '.*' are )(.*)$", line.strip())
        return m.group(1) + ", ".join(sorted(m.group(2).split(", "))) if m else line
    return "\n".join(one(l) for l in text.splitlines())


def parse_scram_describe(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^SCRAM credential configs for user-principal '(.*)' are (.*)$", line.strip())
        if m:
            out[m.group(1)] = dict(kv.split("=iterations=") for kv in m.group(2).split(", "))
    return out


def parse_records(text):
    """Console consumer lines printed with print.timestamp, print.partition, print.offset,
    print.headers, print.key (tab-separated, in that order): list of dicts."""
    recs = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 6 or not parts[0].startswith("CreateTime:"):
            continue
        recs.append({"ts": int(parts[0].split(":", 1)[1]), "p": int(parts[1].split(":", 1)[1]),
                     "off": int(parts[2].split(":", 1)[1]), "headers": parts[3], "key": parts[4],
                     "value": "\t".join(parts[5:])})
    return recs


def parse_offsets(text):
    """kafka-get-offsets: {(topic, partition): offset}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(.+):(\d+):(-?\d+)$", line.strip())
        if m:
            out[(m.group(1), int(m.group(2)))] = int(m.group(3))
    return out


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), unsigned 32 bits."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    n4 = len(data) // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i: 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = data[4 * n4:]
    if len(rest) >= 3:
        h ^= rest[2] << 16
    if len(rest) >= 2:
        h ^= rest[1] << 8
    if len(rest) >= 1:
        h ^= rest[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_of(key: str, n: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % n


def keys_for(prefix, n, want):
    """Keys prefix0, prefix1, ... chosen so that partition p of n gets want[p] of them (in
    order, round robin): deterministic placement on both brokers."""
    left = list(want)
    keys, i = [], 0
    while sum(left):
        k = f"{prefix}{i}"
        p = partition_of(k, n)
        if left[p]:
            keys.append(k)
            left[p] -= 1
        i += 1
    return keys


def iso_utc(ms):
    dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def now_ms():
    return int(time.time() * 1000)


# Common command pieces
BS = ["--bootstrap-server", "{bs}"]
PRINT_ALL = ["--formatter-property", "print.timestamp=true", "--formatter-property", "print.partition=true",
             "--formatter-property", "print.offset=true", "--formatter-property", "print.headers=true",
             "--formatter-property", "print.key=true"]


def create_topic(ctx, topic, partitions=1, configs=()):
    args = BS + ["--create", "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1"]
    for c in configs:
        args += ["--config", c]
    return ctx.both("kafka-topics", args)


def produce_keyed(ctx, b, topic, pairs):
    """pairs: [(key, value)] with the console producer (parse.key, tab-separated)."""
    data = "".join(f"{k}\t{v}\n" for k, v in pairs)
    return ctx.tool(b, "kafka-console-producer", BS + ["--topic", topic, "--reader-property", "parse.key=true",
                                                       "--reader-property", "key.separator=\t",
                                                       "--command-property", "acks=all"], stdin=data)


def consume_all(ctx, b, topic, n, extra=(), timeout_ms=15000, group=None, partition=None):
    """The first n records (at most) of `topic` with the console consumer: subscribed (a group
    joins: ringlog, like Kafka by default, waits 3 s for more members), or assigned one
    partition (no group)."""
    args = BS + ["--topic", topic, "--max-messages", str(n), "--timeout-ms", str(timeout_ms)]
    if partition is None:
        args += ["--from-beginning"]
    else:
        args += ["--partition", str(partition), "--offset", "earliest"]
    args += PRINT_ALL + list(extra)
    if group:
        args += ["--group", group]
    res = ctx.tool(b, "kafka-console-consumer", args, ok=False, timeout=timeout_ms / 1000 + 40)
    return res, parse_records(res.out)


def get_offsets(ctx, b, topic, time_spec):
    res = ctx.tool(b, "kafka-get-offsets", BS + ["--topic", topic, "--time", str(time_spec)])
    return res, {p: o for (t, p), o in parse_offsets(res.out).items() if t == topic}


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------

CHECKS = []  # (id, lane, function)


def check(cid, lane=None):
    def deco(fn):
        CHECKS.append((cid, lane or cid, fn))
        return fn
    return deco


def topic_norm(ctx, b, text):
    """kafka-topics --describe, normalised: ids, the peer's min.insync.replicas, config order."""
    text = norm(ctx, b, text)

    def configs(m):
        items = [c for c in m.group(2).split(",") if c and not (b == KAFKA and c in PEER_ARTIFACT_CONFIGS)]
        return m.group(1) + ",".join(sorted(items))
    return re.sub(r"(Configs:\s*)([^\t\n]*)", configs, text)


def expect_topic(ctx, b, desc, topic, partitions, configs):
    t = desc.get(topic)
    if not ctx.expect(b, t is not None, f"describe does not show topic {topic}"):
        return
    ctx.expect(b, t["PartitionCount"] == str(partitions), f"{topic} PartitionCount {t['PartitionCount']}, want {partitions}")
    ctx.expect(b, sorted(t["partitions"]) == list(range(partitions)),
               f"{topic} partition rows {sorted(t['partitions'])}, want 0..{partitions - 1}")
    for p, f in t["partitions"].items():
        ctx.expect(b, f.get("Leader") == "1" and f.get("Replicas") == "1" and f.get("Isr") == "1",
                   f"{topic}-{p}: leader/replicas/isr {f.get('Leader')}/{f.get('Replicas')}/{f.get('Isr')}, want 1/1/1")
    for c in configs:
        k, _, v = c.partition("=")
        ctx.expect(b, t["Configs"].get(k) == v, f"{topic} config {k}={t['Configs'].get(k)!r}, want {v!r}")


@check("tools.kafka-topics.create")
def topics_create(ctx):
    t = ctx.name("create")
    cfg = ["retention.ms=123456", "cleanup.policy=compact"]
    r = create_topic(ctx, t, 3, cfg)
    ctx.same("create output", r[KAFKA].out, r[RINGLOG].out)
    for b in BROKERS:
        ctx.expect(b, r[b].out.strip() == f"Created topic {t}.", f"create printed {r[b].out.strip()!r}")
    d = ctx.both("kafka-topics", BS + ["--describe", "--topic", t])
    for b in BROKERS:
        expect_topic(ctx, b, parse_topic_describe(d[b].out), t, 3, cfg)


@check("tools.kafka-topics.describe")
def topics_describe(ctx):
    t = ctx.name("describe")
    create_topic(ctx, t, 2, ["retention.ms=3600000", "max.message.bytes=200000"])
    d = ctx.both("kafka-topics", BS + ["--describe", "--topic", t])
    ctx.same("describe", topic_norm(ctx, KAFKA, d[KAFKA].out), topic_norm(ctx, RINGLOG, d[RINGLOG].out))
    for b in BROKERS:
        expect_topic(ctx, b, parse_topic_describe(d[b].out), t, 2, ["retention.ms=3600000", "max.message.bytes=200000"])
    # The topics with overrides only (this one has some).
    o = ctx.both("kafka-topics", BS + ["--describe", "--topic", t, "--topics-with-overrides"])
    ctx.same("describe --topics-with-overrides", topic_norm(ctx, KAFKA, o[KAFKA].out),
             topic_norm(ctx, RINGLOG, o[RINGLOG].out))


@check("tools.kafka-topics.alter-partitions")
def topics_alter(ctx):
    t = ctx.name("alter")
    create_topic(ctx, t, 2)
    a = ctx.both("kafka-topics", BS + ["--alter", "--topic", t, "--partitions", "5"])
    ctx.same("alter output", a[KAFKA].out, a[RINGLOG].out)
    d = ctx.both("kafka-topics", BS + ["--describe", "--topic", t])
    ctx.same("describe after alter", topic_norm(ctx, KAFKA, d[KAFKA].out), topic_norm(ctx, RINGLOG, d[RINGLOG].out))
    for b in BROKERS:
        expect_topic(ctx, b, parse_topic_describe(d[b].out), t, 5, [])
    # A keyed record lands on a new partition by Kafka's partitioner.
    key = keys_for(ctx.name("ak"), 5, [0, 0, 0, 0, 1])[0]
    ctx.per_broker(lambda b: produce_keyed(ctx, b, t, [(key, "v")]))
    o = ctx.per_broker(lambda b: get_offsets(ctx, b, t, -1)[1])
    for b in BROKERS:
        ctx.expect(b, o[b] == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1}, f"end offsets after a keyed record for partition 4: {o[b]}")


@check("tools.kafka-topics.list")
def topics_list(ctx):
    ts = [ctx.name("list-a")]
    create_topic(ctx, ts[0], 1)
    l = ctx.both("kafka-topics", BS + ["--list", "--exclude-internal"])
    mine = {b: sorted(x for x in l[b].out.split() if x.startswith(ctx.name("list-"))) for b in BROKERS}
    ctx.same("list (this run's topics)", "\n".join(mine[KAFKA]), "\n".join(mine[RINGLOG]))
    for b in BROKERS:
        ctx.expect(b, mine[b] == sorted(ts), f"--list shows {mine[b]}, want {sorted(ts)}")
        ctx.expect(b, not any(x.startswith("__") for x in l[b].out.split()),
                   "--exclude-internal still lists internal topics")
    # A regular expression as --topic.
    r = ctx.both("kafka-topics", BS + ["--list", "--topic", ctx.name("list-a") + ".*"])
    ctx.same("list --topic REGEX", r[KAFKA].out, r[RINGLOG].out)
    for b in BROKERS:
        ctx.expect(b, r[b].out.split() == [ts[0]], f"--list --topic REGEX shows {r[b].out.split()}")


@check("tools.kafka-topics.delete")
def topics_delete(ctx):
    t = ctx.name("delete")
    create_topic(ctx, t, 2)
    d = ctx.both("kafka-topics", BS + ["--delete", "--topic", t])
    ctx.same("delete output", d[KAFKA].out, d[RINGLOG].out)

    def gone(b):
        for _ in range(10):
            res = ctx.tool(b, "kafka-topics", BS + ["--list", "--exclude-internal"])
            if t not in res.out.split():
                return True
            time.sleep(0.5)
        return False
    g = ctx.per_broker(gone)
    for b in BROKERS:
        ctx.expect(b, g[b], f"topic {t} still listed after --delete")
    e = ctx.both("kafka-topics", BS + ["--describe", "--topic", t], ok=False)
    for b in BROKERS:
        ctx.expect(b, e[b].rc != 0 and "does not exist" in e[b].out + e[b].err,
                   f"describe of the deleted topic: {e[b].summary()}")
    ctx.same("describe of a deleted topic (exit, error)", (e[KAFKA].rc, e[KAFKA].error_class()),
             (e[RINGLOG].rc, e[RINGLOG].error_class()))


@check("tools.kafka-topics.errors")
def topics_errors(ctx):
    """Refusals: the same exit status and Kafka error class (the messages' wording is each
    broker's own)."""
    t = ctx.name("errors")
    create_topic(ctx, t, 2)
    cases = [
        ("create of an existing topic", ["--create", "--topic", t], "TopicExistsException"),
        ("describe of a missing topic", ["--describe", "--topic", ctx.name("missing")], "IllegalArgumentException"),
        ("alter to fewer partitions", ["--alter", "--topic", t, "--partitions", "1"], "InvalidPartitionsException"),
        ("create with replication factor 3", ["--create", "--topic", ctx.name("rf3"), "--replication-factor", "3"],
         "InvalidReplicationFactorException"),
        ("create with an unknown config", ["--create", "--topic", ctx.name("badcfg"), "--config", "no.such.config=1"],
         "InvalidConfigurationException"),
        ("create with an invalid name", ["--create", "--topic", ctx.name("bad name!")], "InvalidTopicException"),
    ]
    for what, args, want in cases:
        r = ctx.both("kafka-topics", BS + args, ok=False)
        ctx.same(what, (r[KAFKA].rc, r[KAFKA].error_class()), (r[RINGLOG].rc, r[RINGLOG].error_class()))
        for b in BROKERS:
            ctx.expect(b, r[b].rc != 0 and r[b].error_class() == want,
                       f"{what}: want {want}, got {r[b].error_class()} ({r[b].summary(200)})")


# kafka-configs ------------------------------------------------------------------------------

SYNONYMS = ("ringlog does not return config synonyms (synonyms={})",
            lambda t: re.sub(r"synonyms=\{[^\n]*\}", "synonyms={}", t))


def config_norm(ctx, b, text):
    return "\n".join(l for l in norm(ctx, b, text).splitlines()
                     if not (b == KAFKA and any(l.strip().startswith(c + " ") for c in PEER_ARTIFACT_CONFIGS)))


@check("tools.kafka-configs.topic-alter")
def configs_topic_alter(ctx):
    t = ctx.name("cfg")
    create_topic(ctx, t, 1, ["retention.ms=1000000"])
    base = BS + ["--entity-type", "topics", "--entity-name", t]
    steps = [
        (["--alter", "--add-config", "retention.ms=222222,max.message.bytes=65536,segment.ms=7200000,"
          "message.timestamp.after.max.ms=60000,leader.replication.throttled.replicas=[0:1]"],
         {"retention.ms": "222222", "max.message.bytes": "65536", "segment.ms": "7200000",
          "message.timestamp.after.max.ms": "60000", "leader.replication.throttled.replicas": "0:1"}),
        (["--alter", "--delete-config",
          "retention.ms,segment.ms,message.timestamp.after.max.ms,leader.replication.throttled.replicas"],
         {"max.message.bytes": "65536"}),
        (["--alter", "--add-config", "cleanup.policy=[compact,delete]", "--delete-config", "max.message.bytes"],
         {"cleanup.policy": "compact,delete"}),
    ]
    for i, (args, want) in enumerate(steps):
        a = ctx.both("kafka-configs", base + args)
        ctx.same(f"{' '.join(args)} output", a[KAFKA].out, a[RINGLOG].out)
        d = ctx.both("kafka-configs", base + ["--describe"])
        ctx.same(f"describe (want {want})", config_norm(ctx, KAFKA, d[KAFKA].out),
                 config_norm(ctx, RINGLOG, d[RINGLOG].out), [SYNONYMS])
        for b in BROKERS:
            got = {k: v for k, v in parse_config_describe(d[b].out).items()
                   if not (b == KAFKA and f"{k}={v}" in PEER_ARTIFACT_CONFIGS)}
            ctx.expect(b, got == want, f"dynamic configs {got}, want {want}")
        if i == 0:
            # What kafka-configs set shows in kafka-topics --describe too.
            d = ctx.both("kafka-topics", BS + ["--describe", "--topic", t])
            for b in BROKERS:
                cfg = parse_topic_describe(d[b].out).get(t, {}).get("Configs", {})
                cfg = {k: v for k, v in cfg.items() if not (b == KAFKA and f"{k}={v}" in PEER_ARTIFACT_CONFIGS)}
                ctx.expect(b, cfg == want, f"kafka-topics --describe shows configs {cfg}, want {want}")


@check("tools.kafka-configs.topic-invalid")
def configs_topic_invalid(ctx):
    t = ctx.name("cfgbad")
    create_topic(ctx, t, 1)
    base = BS + ["--entity-type", "topics", "--entity-name", t, "--alter"]
    for what, args in [("unknown config", ["--add-config", "no.such.config=1"]),
                       ("bad value", ["--add-config", "retention.ms=abc"]),
                       ("value out of range", ["--add-config", "compression.lz4.level=18"]),
                       ("bad replica list", ["--add-config", "leader.replication.throttled.replicas=x"]),
                       ("unknown topic", None)]:
        if args is None:
            full = BS + ["--entity-type", "topics", "--entity-name", ctx.name("nosuch"), "--alter",
                         "--add-config", "retention.ms=1000"]
        else:
            full = base + args
        r = ctx.both("kafka-configs", full, ok=False)
        ctx.same(what, (r[KAFKA].rc, r[KAFKA].error_class()), (r[RINGLOG].rc, r[RINGLOG].error_class()))
        for b in BROKERS:
            ctx.expect(b, r[b].rc != 0 and r[b].error_class(), f"{what}: not refused ({r[b].summary(200)})")
    d = ctx.both("kafka-configs", BS + ["--entity-type", "topics", "--entity-name", t, "--describe"])
    for b in BROKERS:
        got = {k: v for k, v in parse_config_describe(d[b].out).items() if f"{k}={v}" not in PEER_ARTIFACT_CONFIGS}
        ctx.expect(b, got == {}, f"a refused alter changed the configs: {got}")


@check("tools.kafka-configs.topic-describe-all")
def configs_topic_all(ctx):
    t = ctx.name("cfgall")
    create_topic(ctx, t, 1, ["retention.ms=86400000"])
    d = ctx.both("kafka-configs", BS + ["--entity-type", "topics", "--entity-name", t, "--describe", "--all"])
    c = {b: parse_config_describe(d[b].out) for b in BROKERS}
    common = sorted(set(c[KAFKA]) & set(c[RINGLOG]))
    ctx.same("values of the configs both list", {k: c[KAFKA][k] for k in common}, {k: c[RINGLOG][k] for k in common})
    missing = sorted(set(c[KAFKA]) - set(c[RINGLOG]))
    extra = sorted(set(c[RINGLOG]) - set(c[KAFKA]))
    if missing or extra:
        ctx.diff("ringlog lists only the topic configs it implements, and its own fanout.* ones",
                 f"not listed by ringlog: {missing}; only ringlog: {extra}")
    want = {"retention.ms": "86400000", "cleanup.policy": "delete", "segment.bytes": "1073741824",
            "max.message.bytes": "1048588", "min.insync.replicas": "1", "compression.type": "producer",
            "message.timestamp.type": "CreateTime", "retention.bytes": "-1"}
    for b in BROKERS:
        for k, v in want.items():
            ctx.expect(b, c[b].get(k) == v, f"--all shows {k}={c[b].get(k)!r}, want {v!r}")


@check("tools.kafka-configs.broker-describe")
def configs_broker(ctx):
    for args in (["--entity-type", "brokers", "--entity-name", "1"], ["--entity-type", "brokers", "--entity-default"],
                 ["--entity-type", "brokers"]):
        d = ctx.both("kafka-configs", BS + args + ["--describe"])
        ctx.same(" ".join(args), config_norm(ctx, KAFKA, d[KAFKA].out), config_norm(ctx, RINGLOG, d[RINGLOG].out),
                 [SYNONYMS])
        r = d[RINGLOG].out
        ctx.expect(RINGLOG, ("Dynamic configs for broker 1 are:" in r) or ("Default configs for brokers" in r),
                   f"unexpected output {r!r}")


@check("tools.kafka-configs.broker-describe-all")
def configs_broker_all(ctx):
    d = ctx.both("kafka-configs", BS + ["--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"])
    c = {b: parse_config_describe(d[b].out) for b in BROKERS}
    # Broker settings whose value both brokers share here (kafka-peer.sh sets the peer's
    # auto.create.topics.enable, num.partitions and replication factors as ringlog's defaults).
    same = {"broker.id": "1", "node.id": "1", "log.segment.bytes": "1073741824", "log.retention.hours": "168",
            "message.max.bytes": "1048588", "log.cleanup.policy": "delete", "compression.type": "producer",
            "min.insync.replicas": "1", "auto.create.topics.enable": "false", "num.partitions": "1",
            "default.replication.factor": "1"}
    for k, v in same.items():
        ctx.expect(KAFKA, c[KAFKA].get(k) == v, f"peer's {k}={c[KAFKA].get(k)!r} (test assumption {v!r})")
        got = c[RINGLOG].get(k)
        if got is None:
            ctx.diff("ringlog describes a broker with topic-level config names, not Kafka's broker ones",
                     f"ringlog lacks {k}")
        else:
            ctx.expect(RINGLOG, got == v, f"{k}={got!r}, want {v!r}")
    topic_level = sorted(k for k in c[RINGLOG] if k in ("retention.ms", "cleanup.policy", "segment.bytes",
                                                        "max.message.bytes", "retention.bytes", "segment.ms"))
    if topic_level:
        ctx.diff("ringlog describes a broker with topic-level config names, not Kafka's broker ones",
                 f"ringlog lists topic-level {topic_level} for a broker")


@check("tools.kafka-configs.broker-loggers")
def configs_broker_loggers(ctx):
    """Log levels at run time (KIP-412): each broker names its own loggers (Kafka's are Java
    classes, ringlog's its crates), so the comparison is on what both have: the root logger,
    setting it, and the refusals of an unknown logger, a bad level and removing root."""
    ent = ["--entity-type", "broker-loggers", "--entity-name", "1"]

    def loggers(b, text):
        found = dict(re.findall(r"^\s+([\w.:$]+)=(\w+) sensitive=false", text, re.M))
        ctx.expect(b, found.get("root") in ("INFO", "DEBUG"), f"root logger missing or odd: {found.get('root')!r}")
        return found

    d = ctx.both("kafka-configs", BS + ent + ["--describe"])
    first = {b: loggers(b, d[b].out) for b in BROKERS}
    ctx.expect(RINGLOG, {"net", "engine", "meta"} <= set(first[RINGLOG]), f"ringlog's loggers: {sorted(first[RINGLOG])}")
    try:
        a = ctx.both("kafka-configs", BS + ent + ["--alter", "--add-config", "root=DEBUG"])
        ctx.same("set root=DEBUG", a[KAFKA].out, a[RINGLOG].out)
        d = ctx.both("kafka-configs", BS + ent + ["--describe"])
        for b in BROKERS:
            ctx.expect(b, loggers(b, d[b].out).get("root") == "DEBUG", "root is DEBUG after the set")
        # A logger with no level of its own follows root's.
        ctx.expect(RINGLOG, loggers(RINGLOG, d[RINGLOG].out).get("engine") == "DEBUG", "engine follows root")
    finally:
        ctx.both("kafka-configs", BS + ent + ["--alter", "--add-config", "root=INFO"])
    for what, args in (("unknown logger", ["--add-config", "no.such.logger.x=INFO"]),
                       ("bad level", ["--add-config", "root=LOUD"]),
                       ("remove root", ["--delete-config", "root"])):
        a = ctx.both("kafka-configs", BS + ent + ["--alter"] + args, ok=False)
        for b in BROKERS:
            ctx.expect(b, a[b].rc != 0, f"{what}: accepted: {a[b].summary()}")
        ctx.same(f"{what}: error class", a[KAFKA].error_class(), a[RINGLOG].error_class())


@check("tools.kafka-configs.client-quotas")
def configs_quotas(ctx):
    c1, c2, u1 = ctx.name("qc1"), ctx.name("qc2"), ctx.name("qu1")
    e_c1 = ["--entity-type", "clients", "--entity-name", c1]
    e_uc = ["--entity-type", "users", "--entity-name", u1, "--entity-type", "clients", "--entity-name", c2]
    e_u1 = ["--entity-type", "users", "--entity-name", u1]
    alters = [(e_c1, "producer_byte_rate=1048576,consumer_byte_rate=2097152"), (e_uc, "request_percentage=50"),
              (e_u1, "producer_byte_rate=4194304")]
    want = {
        f"client-id '{c1}'": {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        f"user-principal '{u1}', client-id '{c2}'": {"request_percentage": 50.0},
        f"user-principal '{u1}'": {"producer_byte_rate": 4194304.0},
    }

    def mine(text):
        return "\n".join(l for l in text.splitlines() if ctx.name("q") in l)
    try:
        for ent, cfg in alters:
            a = ctx.both("kafka-configs", BS + ["--alter"] + ent + ["--add-config", cfg])
            ctx.same(f"alter {' '.join(ent)}", a[KAFKA].out, a[RINGLOG].out)
        # By name, and every entity of a type (this run's only).
        for ent, names in ((e_c1, [f"client-id '{c1}'"]), (e_uc, [f"user-principal '{u1}', client-id '{c2}'"]),
                           (["--entity-type", "clients"], [f"client-id '{c1}'"]),
                           (["--entity-type", "users"], [f"user-principal '{u1}'"])):
            d = ctx.both("kafka-configs", BS + ["--describe"] + ent)
            keep = {b: mine(d[b].out) for b in BROKERS}
            ctx.same(f"describe {' '.join(ent)}", sorted_lines(keep[KAFKA]), sorted_lines(keep[RINGLOG]))
            for b in BROKERS:
                got = parse_quota_describe(keep[b])
                exp = {n: want[n] for n in names}
                ctx.expect(b, got == exp, f"describe {' '.join(ent)}: {got}, want {exp}")
        # Delete one key: the other stays.
        ctx.both("kafka-configs", BS + ["--alter"] + e_c1 + ["--delete-config", "producer_byte_rate"])
        d = ctx.both("kafka-configs", BS + ["--describe"] + e_c1)
        ctx.same("describe after a delete", d[KAFKA].out, d[RINGLOG].out)
        for b in BROKERS:
            got = parse_quota_describe(d[b].out)
            ctx.expect(b, got == {f"client-id '{c1}'": {"consumer_byte_rate": 2097152.0}},
                       f"after deleting producer_byte_rate: {got}")
    finally:
        for ent, key in ((e_c1, "consumer_byte_rate"), (e_uc, "request_percentage"), (e_u1, "producer_byte_rate")):
            if ctx.remaining() > 5:
                ctx.both("kafka-configs", BS + ["--alter"] + ent + ["--delete-config", key], ok=False)
    d = ctx.both("kafka-configs", BS + ["--describe", "--entity-type", "clients"])
    for b in BROKERS:
        ctx.expect(b, not mine(d[b].out), f"client quotas left after deleting them all: {mine(d[b].out)!r}")


@check("tools.kafka-configs.scram-users")
def configs_scram(ctx):
    u = ctx.name("scram")
    ent = BS + ["--entity-type", "users", "--entity-name", u]
    steps = [
        (["--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw-one]"], {"SCRAM-SHA-256": "8192"}),
        (["--alter", "--add-config", "SCRAM-SHA-512=[password=pw-two]"],
         {"SCRAM-SHA-256": "8192", "SCRAM-SHA-512": "4096"}),
        (["--alter", "--delete-config", "SCRAM-SHA-512"], {"SCRAM-SHA-256": "8192"}),
        (["--alter", "--delete-config", "SCRAM-SHA-256"], None),
    ]
    for i, (args, want) in enumerate(steps):
        a = ctx.both("kafka-configs", ent + args)
        ctx.same(f"{args[1]} output", a[KAFKA].out, a[RINGLOG].out)
        d = ctx.both("kafka-configs", ent + ["--describe"])
        ctx.same(f"describe after {args[1]} {args[2]}", sorted_scram(d[KAFKA].out),
                 sorted_scram(d[RINGLOG].out))
        for b in BROKERS:
            got = parse_scram_describe(d[b].out).get(u)
            ctx.expect(b, got == want, f"after {args[2]}: credentials {got}, want {want}")
        if i == 1:
            # All users at once (DescribeUserScramCredentials with no names).
            a = ctx.both("kafka-configs", BS + ["--entity-type", "users", "--describe"])
            mine = {b: sorted_scram("\n".join(l for l in a[b].out.splitlines() if f"'{u}'" in l))
                    for b in BROKERS}
            ctx.expect(KAFKA, mine[KAFKA], "describe of all users does not show the user")
            if mine[KAFKA] and not mine[RINGLOG]:
                ctx.diff("gap: `kafka-configs --describe --entity-type users` (no name) lists no SCRAM credentials "
                         "on ringlog", f"ringlog printed {a[RINGLOG].out!r}")
            else:
                ctx.same("describe of all users", mine[KAFKA], mine[RINGLOG])
    # Deleting a credential that is not there.
    r = ctx.both("kafka-configs", ent + ["--alter", "--delete-config", "SCRAM-SHA-256"], ok=False)
    ctx.same("delete of a missing credential", (r[KAFKA].rc, r[KAFKA].error_class()),
             (r[RINGLOG].rc, r[RINGLOG].error_class()))
    for b in BROKERS:
        ctx.expect(b, r[b].error_class() == "ResourceNotFoundException", f"delete of a missing credential: {r[b].summary(200)}")


@check("tools.kafka-configs.scram-two-mechanisms")
def configs_scram_two(ctx):
    u = ctx.name("scram2")
    ent = BS + ["--entity-type", "users", "--entity-name", u]
    r = ctx.both("kafka-configs", ent + ["--alter", "--add-config",
                                         "SCRAM-SHA-256=[password=pw],SCRAM-SHA-512=[password=pw]"], ok=False)
    k, g = (r[KAFKA].rc, r[KAFKA].error_class()), (r[RINGLOG].rc, r[RINGLOG].error_class())
    ctx.expect(KAFKA, k == (1, "DuplicateResourceException"), f"two mechanisms in one alter: {r[KAFKA].summary(200)}")
    if k != g:
        if g == (0, None):
            ctx.diff("ringlog accepts both SCRAM mechanisms of a user in one request; Kafka refuses the second "
                     "alteration of the same user (DuplicateResourceException)")
            d = ctx.tool(RINGLOG, "kafka-configs", ent + ["--describe"])
            ctx.expect(RINGLOG, parse_scram_describe(d.out).get(u) == {"SCRAM-SHA-256": "4096", "SCRAM-SHA-512": "4096"},
                       f"after adding both: {d.out.strip()!r}")
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                ctx.tool(RINGLOG, "kafka-configs", ent + ["--alter", "--delete-config", m])
        else:
            ctx.problem(f"two mechanisms in one alter: kafka {k}, ringlog {g} ({r[RINGLOG].summary(200)})")


# kafka-acls ---------------------------------------------------------------------------------


def parse_acls(text):
    """kafka-acls --list/--add output: {resource pattern: sorted entries}."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(?:Current ACLs|Adding ACLs) for resource `(.*)`:", line.strip())
        if m:
            cur = m.group(1)
            out.setdefault(cur, [])
        elif line.strip().startswith("(principal=") and cur:
            out[cur].append(line.strip())
        elif not line.strip():
            cur = None
    return {k: sorted(v) for k, v in out.items()}


@check("tools.kafka-acls.add-list-remove")
def acls(ctx):
    run = ctx.drv.run_id
    topic, prefix, group = f"acl{run}-t", f"acl{run}-p-", f"acl{run}-g"
    alice, bob = f"User:alice{run}", f"User:bob{run}"
    adds = [
        ["--add", "--allow-principal", alice, "--operation", "Read", "--operation", "Write", "--topic", topic],
        ["--add", "--deny-principal", bob, "--operation", "Describe", "--topic", prefix,
         "--resource-pattern-type", "prefixed"],
        ["--add", "--allow-principal", alice, "--allow-host", "10.0.0.1", "--operation", "Read", "--group", group],
    ]
    for args in adds:
        a = ctx.both("kafka-acls", BS + args, ok=False)
        if a[KAFKA].rc != 0 and "SecurityDisabledException" in a[KAFKA].both:
            ctx.fail("the Kafka peer has no authorizer: start it with --prop authorizer.class.name="
                     "org.apache.kafka.metadata.authorizer.StandardAuthorizer --prop super.users=User:ANONYMOUS")
        for b in BROKERS:
            if a[b].rc != 0:
                ctx.fail(f"{b}: kafka-acls {' '.join(args)}: {a[b].summary()}")
        ctx.same(f"add {' '.join(args[:3])}", parse_acls(a[KAFKA].out), parse_acls(a[RINGLOG].out))
    want = {
        f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)": sorted([
            f"(principal={alice}, host=*, operation=READ, permissionType=ALLOW)",
            f"(principal={alice}, host=*, operation=WRITE, permissionType=ALLOW)"]),
        f"ResourcePattern(resourceType=TOPIC, name={prefix}, patternType=PREFIXED)": [
            f"(principal={bob}, host=*, operation=DESCRIBE, permissionType=DENY)"],
        f"ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)": [
            f"(principal={alice}, host=10.0.0.1, operation=READ, permissionType=ALLOW)"],
    }

    def mine(text):
        return {k: v for k, v in parse_acls(text).items() if f"acl{run}-" in k}
    lists = [("all", ["--list"], want),
             ("principal", ["--list", "--principal", alice],
              {k: v for k, v in want.items() if alice + "," in v[0]}),
             ("prefixed match", ["--list", "--topic", prefix + "x", "--resource-pattern-type", "match"],
              {k: v for k, v in want.items() if f"name={prefix}," in k})]
    for what, args, exp in lists:
        l = ctx.both("kafka-acls", BS + args)
        ctx.same(f"list ({what})", mine(l[KAFKA].out), mine(l[RINGLOG].out))
        for b in BROKERS:
            ctx.expect(b, mine(l[b].out) == exp, f"list ({what}): {mine(l[b].out)}, want {exp}")
    removes = [["--remove", "--force", "--allow-principal", alice, "--operation", "Write", "--topic", topic],
               ["--remove", "--force", "--topic", topic, "--group", group],
               ["--remove", "--force", "--topic", prefix, "--resource-pattern-type", "prefixed"]]
    for i, args in enumerate(removes):
        r = ctx.both("kafka-acls", BS + args)
        ctx.same(f"remove {' '.join(args[2:])}", mine(r[KAFKA].out), mine(r[RINGLOG].out))
        if i == 0:
            l = ctx.both("kafka-acls", BS + ["--list", "--topic", topic])
            for b in BROKERS:
                ctx.expect(b, list(mine(l[b].out).values()) == [[
                    f"(principal={alice}, host=*, operation=READ, permissionType=ALLOW)"]],
                    f"after removing WRITE: {mine(l[b].out)}")
    l = ctx.both("kafka-acls", BS + ["--list"])
    for b in BROKERS:
        ctx.expect(b, mine(l[b].out) == {}, f"ACLs left after removing them: {mine(l[b].out)}")


# kafka-consumer-groups ----------------------------------------------------------------------

GROUP_A = [3, 3]  # records per partition in the first batch
GROUP_B = [2, 2]  # and in the second, produced 3 s later


def groups_fixture(ctx):
    """Topic `grp` (2 partitions): batch A, a pause, batch B; group `g1` has read and committed
    everything. Per broker: records (with timestamps), the end offsets, the pause's middle."""
    topic, group = ctx.name("grp"), ctx.name("g1")
    create_topic(ctx, topic, 2)
    ka = keys_for(ctx.name("ka"), 2, GROUP_A)
    kb = keys_for(ctx.name("kb"), 2, GROUP_B)

    def fill(b):
        produce_keyed(ctx, b, topic, [(k, f"a{i}") for i, k in enumerate(ka)])
        a_done = now_ms()
        time.sleep(3.0)
        produce_keyed(ctx, b, topic, [(k, f"b{i}") for i, k in enumerate(kb)])
        res, recs = consume_all(ctx, b, topic, len(ka) + len(kb), group=group)
        ctx.expect(b, len(recs) == len(ka) + len(kb), f"the group read {len(recs)} records: {res.summary()}")
        return {"records": recs, "mid": a_done + 1500, "ends": [GROUP_A[0] + GROUP_B[0], GROUP_A[1] + GROUP_B[1]]}
    return {"topic": topic, "group": group, "data": ctx.per_broker(fill)}


GROUPS = Fixture("groups", groups_fixture)


def group_offsets(ctx, b, group, topic):
    """Committed offsets of `group` on `topic` from kafka-consumer-groups --describe."""
    d = ctx.tool(b, "kafka-consumer-groups", BS + ["--describe", "--group", group, "--offsets"])
    return {int(r["PARTITION"]): int(r["CURRENT-OFFSET"]) for r in table(d.out)
            if r.get("TOPIC") == topic and r.get("CURRENT-OFFSET", "-").isdigit()}


def groups_norm(ctx, b, text):
    return squeeze(norm(ctx, b, text))


def reset(ctx, fx, spec, want, scope=None, compare=True):
    """kafka-consumer-groups --reset-offsets SPEC --execute on both; the printed plan and the
    offsets committed afterwards must be `want` ({partition: offset}, or {broker: that}).
    compare=False: a check's starting point, compared with neither Kafka nor a describe."""
    topic, group = fx["topic"], fx["group"]
    args = BS + ["--group", group, "--topic", scope or topic, "--reset-offsets"] + spec + ["--execute"]
    r = ctx.both("kafka-consumer-groups", args)
    if compare:
        ctx.same(f"reset {' '.join(spec)}", groups_norm(ctx, KAFKA, r[KAFKA].out), groups_norm(ctx, RINGLOG, r[RINGLOG].out))
    for b in BROKERS:
        plan = {int(x["PARTITION"]): int(x["NEW-OFFSET"]) for x in table(r[b].out)}
        w = want[b] if isinstance(want, dict) and b in want else want
        ctx.expect(b, plan == w, f"reset {' '.join(spec)} printed {plan}, want {w}")
    if not compare:
        return None
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, group, topic))
    for b in BROKERS:
        w = want[b] if isinstance(want, dict) and b in want else want
        ctx.expect(b, all(after[b].get(p) == o for p, o in w.items()),
                   f"after reset {' '.join(spec)} the group's offsets are {after[b]}, want {w}")
    return after


@check("tools.kafka-consumer-groups.list", lane="groups")
def groups_list(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    for args in (["--list", "--state"], ["--list", "--type"]):
        l = ctx.both("kafka-consumer-groups", BS + args)
        keep = {b: squeeze("\n".join(x for x in l[b].out.splitlines()
                                     if x.startswith(fx["group"]) or x.startswith("GROUP"))) for b in BROKERS}
        ctx.same(" ".join(args), keep[KAFKA], keep[RINGLOG])
        for b in BROKERS:
            rows = [x.split() for x in keep[b].splitlines() if x.startswith(fx["group"])]
            ctx.expect(b, len(rows) == 1, f"{' '.join(args)}: the group is listed {len(rows)} times")
            if rows and "--state" in args:
                ctx.expect(b, rows[0][1:] == ["Empty"], f"{' '.join(args)}: {rows[0]}")
            if rows and "--type" in args:
                ctx.expect(b, rows[0][1:] == ["Classic"], f"{' '.join(args)}: {rows[0]}")


@check("tools.kafka-consumer-groups.describe", lane="groups")
def groups_describe(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    g = fx["group"]
    for extra in ([], ["--state"], ["--members", "--verbose"]):
        d = ctx.both("kafka-consumer-groups", BS + ["--describe", "--group", g] + extra)
        ctx.same(f"describe {' '.join(extra)}", groups_norm(ctx, KAFKA, d[KAFKA].out), groups_norm(ctx, RINGLOG, d[RINGLOG].out))
        for b in BROKERS:
            rows = table(d[b].out)
            if extra == []:
                ends = fx["data"][b]["ends"]
                got = {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows}
                exp = {p: (str(e), str(e), "0") for p, e in enumerate(ends)}
                ctx.expect(b, got == exp, f"describe: {got}, want {exp}")
            if extra == ["--state"]:
                ctx.expect(b, rows and rows[0].get("STATE") == "Empty" and rows[0].get("#MEMBERS") == "0",
                           f"describe --state: {rows}")


@check("tools.kafka-consumer-groups.describe-missing")
def groups_describe_missing(ctx):
    g = ctx.name("nogroup")
    d = ctx.both("kafka-consumer-groups", BS + ["--describe", "--group", g], ok=False)
    k, r = (d[KAFKA].rc, d[KAFKA].error_class()), (d[RINGLOG].rc, d[RINGLOG].error_class())
    ctx.expect(KAFKA, k[1] == "GroupIdNotFoundException", f"describe of a missing group: {d[KAFKA].summary()}")
    if k != r and f"Consumer group '{g}' does not exist." in d[RINGLOG].out:
        ctx.diff("gap: ringlog describes a group that does not exist as an empty, dead group instead of answering "
                 "GROUP_ID_NOT_FOUND", d[RINGLOG].summary())
    else:
        ctx.same("describe of a missing group (exit, error)", k, r)


def ends_of(fx, b):
    return dict(enumerate(fx["data"][b]["ends"]))


@check("tools.kafka-consumer-groups.reset-to-earliest", lane="groups")
def groups_reset_earliest(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    reset(ctx, fx, ["--to-latest"], {b: ends_of(fx, b) for b in BROKERS}, compare=False)
    reset(ctx, fx, ["--to-earliest"], {0: 0, 1: 0})


@check("tools.kafka-consumer-groups.reset-to-latest", lane="groups")
def groups_reset_latest(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    reset(ctx, fx, ["--to-earliest"], {0: 0, 1: 0}, compare=False)
    reset(ctx, fx, ["--to-latest"], {b: ends_of(fx, b) for b in BROKERS})


@check("tools.kafka-consumer-groups.reset-to-offset", lane="groups")
def groups_reset_offset(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    reset(ctx, fx, ["--to-offset", "2"], {0: 2, 1: 2})
    # One partition only (TOPIC:PARTITION), the other keeps its offset.
    reset(ctx, fx, ["--to-offset", "4"], {1: 4}, scope=f"{fx['topic']}:1")
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, fx["group"], fx["topic"]))
    for b in BROKERS:
        ctx.expect(b, after[b] == {0: 2, 1: 4}, f"after resetting partition 1 only: {after[b]}")
    # Past the end: the tool clamps to the log end offset.
    reset(ctx, fx, ["--to-offset", "100"], {b: ends_of(fx, b) for b in BROKERS})


@check("tools.kafka-consumer-groups.reset-shift-by", lane="groups")
def groups_reset_shift(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    reset(ctx, fx, ["--to-offset", "3"], {0: 3, 1: 3}, compare=False)
    reset(ctx, fx, ["--shift-by", "-2"], {0: 1, 1: 1})
    reset(ctx, fx, ["--shift-by", "-10"], {0: 0, 1: 0})


def first_at_or_after(recs, p, t, end):
    offs = [r["off"] for r in recs if r["p"] == p and r["ts"] >= t]
    return min(offs) if offs else end


@check("tools.kafka-consumer-groups.reset-to-datetime", lane="groups")
def groups_reset_datetime(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    want = {}
    for b in BROKERS:
        d = fx["data"][b]
        want[b] = {p: first_at_or_after(d["records"], p, d["mid"], d["ends"][p]) for p in (0, 1)}
        # Between the batches: the first record of batch B.
        ctx.expect(b, want[b] == {0: GROUP_A[0], 1: GROUP_A[1]},
                   f"record timestamps do not split the batches ({want[b]}): {d['records']}")
    # Each broker gets the middle of its own pause (the same command line otherwise).
    topic, group = fx["topic"], fx["group"]
    r = ctx.per_broker(lambda b: ctx.tool(b, "kafka-consumer-groups", BS + [
        "--group", group, "--topic", topic, "--reset-offsets", "--to-datetime", iso_utc(fx["data"][b]["mid"]),
        "--execute"]))
    ctx.same("reset --to-datetime (the pause's middle)", groups_norm(ctx, KAFKA, r[KAFKA].out),
             groups_norm(ctx, RINGLOG, r[RINGLOG].out))
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, group, topic))
    for b in BROKERS:
        plan = {int(x["PARTITION"]): int(x["NEW-OFFSET"]) for x in table(r[b].out)}
        ctx.expect(b, plan == want[b], f"--to-datetime printed {plan}, want {want[b]}")
        ctx.expect(b, after[b] == want[b], f"--to-datetime committed {after[b]}, want {want[b]}")
    # Before everything: the start.
    reset(ctx, fx, ["--to-datetime", "2020-01-01T00:00:00.000Z"], {0: 0, 1: 0})


@check("tools.kafka-consumer-groups.reset-by-duration", lane="groups")
def groups_reset_duration(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    topic, group = fx["topic"], fx["group"]

    def go(b):
        d = fx["data"][b]
        t0 = now_ms()
        dur = (t0 - d["mid"]) / 1000.0
        res = ctx.tool(b, "kafka-consumer-groups", BS + ["--group", group, "--topic", topic, "--reset-offsets",
                                                         "--by-duration", f"PT{dur:.3f}S", "--execute"])
        t1 = now_ms()
        # The tool's "now" lies in [t0, t1]: any target in [mid, mid + (t1 - t0)] is right.
        ok = {p: {first_at_or_after(d["records"], p, d["mid"] + dt, d["ends"][p]) for dt in range(0, t1 - t0 + 1, 50)}
              | {first_at_or_after(d["records"], p, d["mid"] + t1 - t0, d["ends"][p])} for p in (0, 1)}
        return res, ok
    r = ctx.per_broker(go)
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, group, topic))
    for b in BROKERS:
        res, ok = r[b]
        plan = {int(x["PARTITION"]): int(x["NEW-OFFSET"]) for x in table(res.out)}
        ctx.expect(b, set(plan) == {0, 1} and all(plan[p] in ok[p] for p in plan),
                   f"--by-duration printed {plan}, want one of {ok}")
        ctx.expect(b, after[b] == plan, f"--by-duration committed {after[b]}, printed {plan}")
    # The same plan on both when the timing allows one answer only (it does: 3 s pause).
    ctx.same("reset --by-duration", groups_norm(ctx, KAFKA, r[KAFKA][0].out), groups_norm(ctx, RINGLOG, r[RINGLOG][0].out))
    # A long duration: the start.
    reset(ctx, fx, ["--by-duration", "P1D"], {0: 0, 1: 0})


@check("tools.kafka-consumer-groups.reset-dry-run", lane="groups")
def groups_reset_dry(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    reset(ctx, fx, ["--to-offset", "1"], {0: 1, 1: 1}, compare=False)
    args = BS + ["--group", fx["group"], "--topic", fx["topic"], "--reset-offsets", "--to-earliest", "--dry-run"]
    r = ctx.both("kafka-consumer-groups", args)
    ctx.same("reset --dry-run", groups_norm(ctx, KAFKA, r[KAFKA].out), groups_norm(ctx, RINGLOG, r[RINGLOG].out))
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, fx["group"], fx["topic"]))
    for b in BROKERS:
        ctx.expect(b, after[b] == {0: 1, 1: 1}, f"--dry-run changed the offsets: {after[b]}")


@check("tools.kafka-consumer-groups.reset-to-current", lane="groups")
def groups_reset_current(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    topic, group = fx["topic"], fx["group"]
    reset(ctx, fx, ["--to-offset", "2"], {0: 2}, scope=f"{topic}:0", compare=False)
    reset(ctx, fx, ["--to-offset", "4"], {1: 4}, scope=f"{topic}:1", compare=False)
    # Each partition stays at its committed offset.
    reset(ctx, fx, ["--to-current"], {0: 2, 1: 4})
    # A partition without a committed offset goes to its log end.
    d = ctx.both("kafka-consumer-groups", BS + ["--delete-offsets", "--group", group, "--topic", f"{topic}:0"])
    for b in BROKERS:
        ctx.expect(b, "Successful" in d[b].out, f"delete-offsets printed {d[b].out!r}")
    reset(ctx, fx, ["--to-current"], {b: {0: fx["data"][b]["ends"][0], 1: 4} for b in BROKERS})


@check("tools.kafka-consumer-groups.reset-from-file", lane="groups")
def groups_reset_from_file(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    topic, group = fx["topic"], fx["group"]
    reset(ctx, fx, ["--to-offset", "1"], {0: 1, 1: 1}, compare=False)
    with tempfile.TemporaryDirectory(prefix="peer-tools-") as d:
        both_csv = os.path.join(d, "both.csv")
        one_csv = os.path.join(d, "one.csv")
        with open(both_csv, "w") as f:
            # Past the end: the tool clamps to the log end offset, as for --to-offset.
            f.write(f"{topic},0,4\n{topic},1,100\n")
        with open(one_csv, "w") as f:
            f.write(f"{topic},1,2\n")
        reset(ctx, fx, ["--from-file", both_csv], {b: {0: 4, 1: fx["data"][b]["ends"][1]} for b in BROKERS})
        # A file naming one partition: the other keeps its offset.
        reset(ctx, fx, ["--from-file", one_csv], {1: 2})
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, group, topic))
    for b in BROKERS:
        ctx.expect(b, after[b] == {0: 4, 1: 2}, f"after resetting partition 1 from a file: {after[b]}")


@check("tools.kafka-consumer-groups.delete-offsets", lane="groups")
def groups_delete_offsets(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    reset(ctx, fx, ["--to-offset", "1"], {0: 1, 1: 1}, compare=False)
    d = ctx.both("kafka-consumer-groups", BS + ["--delete-offsets", "--group", fx["group"], "--topic", f"{fx['topic']}:0"])
    ctx.same("delete-offsets", groups_norm(ctx, KAFKA, d[KAFKA].out), groups_norm(ctx, RINGLOG, d[RINGLOG].out))
    after = ctx.per_broker(lambda b: group_offsets(ctx, b, fx["group"], fx["topic"]))
    for b in BROKERS:
        ctx.expect(b, after[b] == {1: 1}, f"after deleting partition 0's offset: {after[b]}")
        ctx.expect(b, "Successful" in d[b].out, f"delete-offsets printed {d[b].out!r}")


@check("tools.kafka-consumer-groups.delete", lane="groups")
def groups_delete(ctx):
    fx = GROUPS.get(ctx.drv, ctx)
    d = ctx.both("kafka-consumer-groups", BS + ["--delete", "--group", fx["group"]])
    ctx.same("delete", d[KAFKA].out, d[RINGLOG].out)
    l = ctx.both("kafka-consumer-groups", BS + ["--list"])
    for b in BROKERS:
        ctx.expect(b, fx["group"] not in l[b].out.split(), "the deleted group is still listed")
    e = ctx.both("kafka-consumer-groups", BS + ["--delete", "--group", ctx.name("nogroup")], ok=False)
    ctx.same("delete of a missing group", (e[KAFKA].rc, e[KAFKA].error_class()), (e[RINGLOG].rc, e[RINGLOG].error_class()))
    for b in BROKERS:
        ctx.expect(b, e[b].error_class() == "GroupIdNotFoundException", f"delete of a missing group: {e[b].summary(200)}")


# kafka-transactions and read_committed --------------------------------------------------------

TXN_COMMITTED = 500


def txn_fixture(ctx):
    """Topic `tx` (1 partition): transaction `txc` committed 500 records (offsets 0..499, its
    marker at 500); then transaction `txo` was left open (its producer killed) with some records
    from offset 501."""
    topic = ctx.name("tx")
    txc, txo = ctx.name("txc"), ctx.name("txo")
    create_topic(ctx, topic, 1)

    def fill(b):
        ctx.tool(b, "kafka-producer-perf-test", BS + [
            "--topic", topic, "--num-records", str(TXN_COMMITTED), "--record-size", "50", "--throughput", "-1",
            "--transactional-id", txc, "--transaction-duration-ms", "600000"])
        p = ctx.drv.runner.spawn("kafka-producer-perf-test", ctx.fill(b, BS + [
            "--topic", topic, "--num-records", "100000", "--record-size", "50", "--throughput", "20",
            "--transactional-id", txo, "--transaction-duration-ms", "600000",
            "--command-property", "transaction.timeout.ms=300000", "linger.ms=0"]))
        try:
            end = None
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                end = get_offsets(ctx, b, topic, -1)[1].get(0)
                if end is not None and end > TXN_COMMITTED + 1:
                    break
                if p.poll() is not None:
                    break
                time.sleep(0.3)
        finally:
            ctx.drv.runner.kill(p)
            res = ctx.drv.runner.finish(b, p, 1)
            ctx.note(f"[{b}] open-transaction producer: {res.summary(400)}")
        time.sleep(0.5)
        end = get_offsets(ctx, b, topic, -1)[1].get(0)
        if not ctx.expect(b, end is not None and end > TXN_COMMITTED + 1,
                          f"the open transaction wrote nothing (log end {end})"):
            raise CheckAbort()
        return {"end": end, "open": end - TXN_COMMITTED - 1}
    return {"topic": topic, "txc": txc, "txo": txo, "data": ctx.per_broker(fill)}


TXN = Fixture("transactions", txn_fixture)

START_TIME_LIST = ("ringlog does not keep a completed transaction's start time, so `list --duration-filter` "
                   "leaves completed transactions out",
                   lambda rows: [r for r in rows if r.get("TransactionState") not in ("CompleteCommit", "CompleteAbort")])

TV2_EPOCH = ("ringlog has transaction version 1 only: a producer's epoch does not grow with every "
             "transaction (KIP-890)",
             lambda rows: [dict(r, ProducerEpoch="E") for r in rows])


def txn_rows(ctx, b, text, ids):
    rows = [dict(r) for r in table(norm(ctx, b, text))]
    return sorted([r for r in rows if r.get("TransactionalId") in ids or not ids],
                  key=lambda r: json.dumps(r, sort_keys=True))


def ids_norm(rows):
    """Producer ids are allocated differently by each broker."""
    return [dict(r, ProducerId="P") if "ProducerId" in r else r for r in rows]


@check("tools.kafka-transactions.list", lane="transactions")
def txn_list(ctx):
    fx = TXN.get(ctx.drv, ctx)
    l = ctx.both("kafka-transactions", BS + ["list"])
    rows = {b: ids_norm(txn_rows(ctx, b, l[b].out, {fx["txc"], fx["txo"]})) for b in BROKERS}
    ctx.same("list (this run's transactions)", rows[KAFKA], rows[RINGLOG])
    for b in BROKERS:
        st = {r["TransactionalId"]: r.get("TransactionState") for r in rows[b]}
        ctx.expect(b, st == {fx["txc"]: "CompleteCommit", fx["txo"]: "Ongoing"}, f"list: states {st}")
    # Open for longer than a second: the open one (Kafka also lists completed ones by the start
    # time of their last transaction, which ringlog does not keep).
    l = ctx.both("kafka-transactions", BS + ["list", "--duration-filter", "1000"])
    rows = {b: ids_norm(txn_rows(ctx, b, l[b].out, {fx["txc"], fx["txo"]})) for b in BROKERS}
    ctx.same("list --duration-filter 1000", rows[KAFKA], rows[RINGLOG], [START_TIME_LIST])
    for b in BROKERS:
        ids = [r.get("TransactionalId") for r in rows[b]]
        ctx.expect(b, fx["txo"] in ids, f"list --duration-filter 1000: {ids} (the open transaction missing)")


@check("tools.kafka-transactions.list-pattern", lane="transactions")
def txn_list_pattern(ctx):
    fx = TXN.get(ctx.drv, ctx)
    l = ctx.both("kafka-transactions", BS + ["list", "--transactional-id-pattern", ctx.name("tx") + ".*"], ok=False)
    ctx.expect(KAFKA, l[KAFKA].rc == 0, f"list --transactional-id-pattern: {l[KAFKA].summary()}")
    if l[RINGLOG].rc != 0 and "does not support [TransactionalIdPattern]" in l[RINGLOG].both:
        ctx.diff("gap: ringlog's ListTransactions is version 1, without the transactional id pattern of version 2",
                 l[RINGLOG].summary())
        return
    rows = {b: ids_norm(txn_rows(ctx, b, l[b].out, set())) for b in BROKERS}
    ctx.same("list --transactional-id-pattern", rows[KAFKA], rows[RINGLOG])
    for b in BROKERS:
        ctx.expect(b, sorted(r.get("TransactionalId") for r in rows[b]) == sorted([fx["txc"], fx["txo"]]),
                   f"list --transactional-id-pattern: {rows[b]}")


@check("tools.kafka-transactions.describe", lane="transactions")
def txn_describe(ctx):
    fx = TXN.get(ctx.drv, ctx)
    topic = fx["topic"]
    start_time = ("ringlog does not keep a completed transaction's start time (CurrentTransactionStartTimeMs and "
                  "TransactionDurationMs are None)",
                  lambda rows: [dict(r, CurrentTransactionStartTimeMs="T", TransactionDurationMs="T")
                                if r.get("TransactionState") == "CompleteCommit" else r for r in rows])
    for tid, state, parts in ((fx["txc"], "CompleteCommit", ""), (fx["txo"], "Ongoing", f"{topic}-0")):
        d = ctx.both("kafka-transactions", BS + ["describe", "--transactional-id", tid])
        rows = {}
        for b in BROKERS:
            rs = [dict(r) for r in table(norm(ctx, b, d[b].out))]
            for r in rs:
                if r.get("TransactionDurationMs", "").isdigit():
                    r["TransactionDurationMs"] = "D"
            rows[b] = ids_norm(rs)
        ctx.same(f"describe {state}", rows[KAFKA], rows[RINGLOG], [TV2_EPOCH, start_time])
        for b in BROKERS:
            r = rows[b][0] if rows[b] else {}
            ctx.expect(b, r.get("TransactionalId") == tid and r.get("TransactionState") == state
                       and r.get("TopicPartitions", "") == parts and r.get("CoordinatorId") == "1",
                       f"describe {tid}: {r}")
    e = ctx.both("kafka-transactions", BS + ["describe", "--transactional-id", ctx.name("notx")], ok=False)
    ctx.same("describe of an unknown id", (e[KAFKA].rc, e[KAFKA].error_class()), (e[RINGLOG].rc, e[RINGLOG].error_class()))


@check("tools.kafka-transactions.describe-producers", lane="transactions")
def txn_describe_producers(ctx):
    fx = TXN.get(ctx.drv, ctx)
    d = ctx.both("kafka-transactions", BS + ["describe-producers", "--topic", fx["topic"], "--partition", "0"])
    rows = {}
    for b in BROKERS:
        rs = ids_norm([dict(r) for r in table(norm(ctx, b, d[b].out))])
        rows[b] = sorted(rs, key=lambda r: r.get("CurrentTransactionStartOffset", ""))
    for b in BROKERS:
        openr = [r for r in rows[b] if r.get("CurrentTransactionStartOffset") == str(TXN_COMMITTED + 1)]
        if openr:
            ctx.expect(b, openr[0].get("LastSequence") == str(fx["data"][b]["open"] - 1),
                       f"the open producer's LastSequence {openr[0].get('LastSequence')}, "
                       f"want {fx['data'][b]['open'] - 1}")
        for r in rows[b]:
            if r.get("CurrentTransactionStartOffset") != "None":
                r["LastSequence"] = "S"  # how many records the open transaction got: timing
    marker_seq = ("ringlog keeps a producer's last data sequence after a transaction marker (Kafka's transaction "
                  "version 2 bumps the epoch and resets the sequence)",
                  lambda rows: [dict(r, LastSequence="S") for r in rows])
    coord_epoch = ("gap: ringlog's LatestCoordinatorEpoch is 0 before any marker and -1 after one (Kafka: -1, "
                   "then the coordinator's epoch)",
                   lambda rows: [dict(r, LatestCoordinatorEpoch="C") for r in rows])
    ctx.same("describe-producers", rows[KAFKA], rows[RINGLOG], [TV2_EPOCH, marker_seq, coord_epoch])
    for b in BROKERS:
        starts = sorted(r.get("CurrentTransactionStartOffset") for r in rows[b])
        ctx.expect(b, starts == [str(TXN_COMMITTED + 1), "None"],
                   f"describe-producers: open transactions start at {starts}, want [{TXN_COMMITTED + 1}, None]")


@check("tools.kafka-transactions.find-hanging", lane="transactions")
def txn_find_hanging(ctx):
    fx = TXN.get(ctx.drv, ctx)
    for extra in ([], ["--max-transaction-timeout", "0"]):
        h = ctx.both("kafka-transactions", BS + ["find-hanging", "--broker-id", "1"] + extra)
        ctx.same(f"find-hanging {' '.join(extra)}", squeeze(h[KAFKA].out), squeeze(h[RINGLOG].out))
        for b in BROKERS:
            rows = [r for r in table(h[b].out) if r.get("Topic") == fx["topic"]]
            ctx.expect(b, rows == [], f"find-hanging {' '.join(extra)}: the coordinator's open transaction is "
                                      f"reported hanging: {rows}")
    h = ctx.both("kafka-transactions", BS + ["find-hanging", "--topic", fx["topic"]])
    ctx.same("find-hanging --topic", squeeze(h[KAFKA].out), squeeze(h[RINGLOG].out))


@check("tools.kafka-console.read-committed", lane="transactions")
def console_read_committed(ctx):
    fx = TXN.get(ctx.drv, ctx)
    topic = fx["topic"]

    def go(b):
        n = fx["data"][b]["open"]
        rc, rcr = consume_all(ctx, b, topic, TXN_COMMITTED + n, ["--isolation-level", "read_committed"], 5000,
                              partition=0)
        ru, rur = consume_all(ctx, b, topic, TXN_COMMITTED + n, ["--isolation-level", "read_uncommitted"], 15000,
                              partition=0)
        return rcr, rur, n
    r = ctx.per_broker(go)
    for b in BROKERS:
        rcr, rur, n = r[b]
        ctx.expect(b, [x["off"] for x in rcr] == list(range(TXN_COMMITTED)),
                   f"read_committed read {len(rcr)} records (offsets {rcr[:1]}..), want the {TXN_COMMITTED} committed")
        want_u = list(range(TXN_COMMITTED)) + list(range(TXN_COMMITTED + 1, TXN_COMMITTED + 1 + n))
        ctx.expect(b, [x["off"] for x in rur] == want_u,
                   f"read_uncommitted read {len(rur)} records, want {len(want_u)} (committed and open)")
    ctx.same("read_committed record count", len(r[KAFKA][0]), len(r[RINGLOG][0]))


@check("tools.kafka-transactions.abort", lane="transactions")
def txn_abort(ctx):
    fx = TXN.get(ctx.drv, ctx)
    topic = fx["topic"]
    a = ctx.both("kafka-transactions", BS + ["abort", "--topic", topic, "--partition", "0", "--start-offset",
                                             str(TXN_COMMITTED + 1)], ok=False)
    ctx.same("abort (exit, error)", (a[KAFKA].rc, a[KAFKA].error_class()), (a[RINGLOG].rc, a[RINGLOG].error_class()))
    ctx.same("abort output", squeeze(a[KAFKA].out), squeeze(a[RINGLOG].out))
    for b in BROKERS:
        ctx.expect(b, a[b].rc == 0, f"abort failed: {a[b].summary()}")
    d = ctx.both("kafka-transactions", BS + ["describe-producers", "--topic", topic, "--partition", "0"])
    for b in BROKERS:
        starts = sorted(r.get("CurrentTransactionStartOffset") for r in table(d[b].out))
        ctx.expect(b, starts == ["None", "None"], f"after abort, open transactions start at {starts}")

    def go(b):
        produce_keyed(ctx, b, topic, [("after", "abort")])
        res, recs = consume_all(ctx, b, topic, TXN_COMMITTED + 1, ["--isolation-level", "read_committed"], 15000,
                                partition=0)
        return recs
    r = ctx.per_broker(go)
    for b in BROKERS:
        recs = r[b]
        ctx.expect(b, len(recs) == TXN_COMMITTED + 1 and recs[-1]["key"] == "after"
                   and recs[-1]["off"] == fx["data"][b]["end"] + 1,
                   f"read_committed after the abort: {len(recs)} records, last {recs[-1:]}; want the committed "
                   f"ones and the new record at {fx['data'][b]['end'] + 1} (after the abort marker)")


# kafka-log-dirs, kafka-get-offsets, kafka-delete-records ----------------------------------------


@check("tools.kafka-log-dirs.describe")
def log_dirs(ctx):
    t = ctx.name("logdirs")
    create_topic(ctx, t, 2)
    keys = keys_for(ctx.name("ld"), 2, [4, 0])
    ctx.per_broker(lambda b: produce_keyed(ctx, b, t, [(k, "x" * 100) for k in keys]))
    d = ctx.both("kafka-log-dirs", BS + ["--describe", "--topic-list", t])
    js = {}
    for b in BROKERS:
        line = [l for l in d[b].out.splitlines() if l.startswith("{")]
        if not ctx.expect(b, line, f"no JSON in {d[b].out!r}"):
            raise CheckAbort()
        js[b] = json.loads(line[0])

    def shape(j):
        out = []
        for br in j["brokers"]:
            for ld in br["logDirs"]:
                out.append({"broker": br["broker"], "error": ld["error"], "logDir": "DIR",
                            "partitions": sorted(({**p, "size": "SIZE"} for p in ld["partitions"]),
                                                 key=lambda p: p["partition"])})
        return {"version": j.get("version"), "dirs": out}
    ctx.same("log dirs (sizes and paths aside)", shape(js[KAFKA]), shape(js[RINGLOG]))
    for b in BROKERS:
        parts = {p["partition"]: p for br in js[b]["brokers"] for ld in br["logDirs"] for p in ld["partitions"]}
        ctx.expect(b, sorted(parts) == [f"{t}-0", f"{t}-1"], f"partitions {sorted(parts)}")
        if parts.get(f"{t}-0"):
            ctx.expect(b, parts[f"{t}-0"]["size"] > 400,
                       f"{t}-0 size {parts[f'{t}-0']['size']}, want at least the 4 records' bytes")
            ctx.expect(b, parts[f"{t}-0"]["offsetLag"] == 0 and not parts[f"{t}-0"]["isFuture"], f"{parts[f'{t}-0']}")
        if parts.get(f"{t}-1"):
            ctx.expect(b, parts[f"{t}-1"]["size"] == 0, f"{t}-1 (empty) size {parts[f'{t}-1']['size']}")
        dirs = [ld["logDir"] for br in js[b]["brokers"] for ld in br["logDirs"]]
        ctx.expect(b, len(dirs) == 1 and dirs[0].startswith("/"), f"log dirs {dirs}")


def offsets_fixture(ctx):
    """Topic `offs` (1 partition): 5 records, a pause, 5 more. Per broker: the records."""
    topic = ctx.name("offs")
    create_topic(ctx, topic, 1)

    def fill(b):
        produce_keyed(ctx, b, topic, [(f"k{i}", f"v{i}") for i in range(5)])
        a_done = now_ms()
        time.sleep(1.5)
        produce_keyed(ctx, b, topic, [(f"k{i}", f"v{i}") for i in range(5, 10)])
        res, recs = consume_all(ctx, b, topic, 10, partition=0)
        if not ctx.expect(b, [r["off"] for r in recs] == list(range(10)), f"read back {len(recs)} records"):
            raise CheckAbort()
        return {"records": recs, "mid": a_done + 500}
    return {"topic": topic, "data": ctx.per_broker(fill)}


OFFSETS = Fixture("offsets", offsets_fixture)


def offsets_check(ctx, time_spec, want_fn, label, compare=True):
    """kafka-get-offsets --time SPEC on the offsets fixture. compare=False where the right
    answer depends on each broker's own record timestamps (then the two must be right alike)."""
    fx = OFFSETS.get(ctx.drv, ctx)
    r = ctx.per_broker(lambda b: get_offsets(ctx, b, fx["topic"], time_spec(b, fx) if callable(time_spec) else time_spec))
    right = {}
    for b in BROKERS:
        want = want_fn(b, fx)
        right[b] = r[b][1] == want
        ctx.expect(b, right[b], f"--time {label}: {r[b][1]}, want {want}")
    if compare:
        ctx.same(f"--time {label}", r[KAFKA][0].out, r[RINGLOG][0].out)
    else:
        ctx.same(f"--time {label} (right on its own records)", right[KAFKA], right[RINGLOG])


@check("tools.kafka-get-offsets.latest", lane="offsets")
def offsets_latest(ctx):
    offsets_check(ctx, -1, lambda b, fx: {0: 10}, "-1 (latest)")


@check("tools.kafka-get-offsets.earliest", lane="offsets")
def offsets_earliest(ctx):
    offsets_check(ctx, -2, lambda b, fx: {0: 0}, "-2 (earliest)")


@check("tools.kafka-get-offsets.max-timestamp", lane="offsets")
def offsets_max_ts(ctx):
    def want(b, fx):
        recs = fx["data"][b]["records"]
        top = max(r["ts"] for r in recs)
        # Kafka answers the first offset of the largest timestamp.
        return {0: min(r["off"] for r in recs if r["ts"] == top)}
    offsets_check(ctx, -3, want, "-3 (max-timestamp)", compare=False)


@check("tools.kafka-get-offsets.earliest-local", lane="offsets")
def offsets_earliest_local(ctx):
    offsets_check(ctx, -4, lambda b, fx: {0: 0}, "-4 (earliest-local)")


@check("tools.kafka-get-offsets.latest-tiered", lane="offsets")
def offsets_latest_tiered(ctx):
    # Without tiered storage there is no tiered offset: the tool prints no partition.
    offsets_check(ctx, -5, lambda b, fx: {}, "-5 (latest-tiered)")


@check("tools.kafka-get-offsets.by-timestamp", lane="offsets")
def offsets_by_ts(ctx):
    def want(b, fx):
        d = fx["data"][b]
        return {0: first_at_or_after(d["records"], 0, d["mid"], 10)}

    def fx_check(b, fx):
        return fx["data"][b]["mid"]
    offsets_check(ctx, fx_check, want, "<the pause's middle>", compare=False)
    fx = OFFSETS.get(ctx.drv, ctx)
    for b in BROKERS:
        ctx.expect(b, want(b, fx) == {0: 5}, f"timestamps do not split the batches: {fx['data'][b]['records']}")
    # Later than every record: no offset (Kafka prints the partition without one... or none).
    r = ctx.per_broker(lambda b: get_offsets(ctx, b, fx["topic"], now_ms() + 3_600_000))
    ctx.same("--time <an hour from now>", r[KAFKA][0].out, r[RINGLOG][0].out)


@check("tools.kafka-get-offsets.partitions")
def offsets_partitions(ctx):
    t = ctx.name("offp")
    create_topic(ctx, t, 3)
    keys = keys_for(ctx.name("op"), 3, [1, 2, 3])
    ctx.per_broker(lambda b: produce_keyed(ctx, b, t, [(k, "v") for k in keys]))
    for args, want in ((["--topic-partitions", f"{t}:0,{t}:2"], {(t, 0): 1, (t, 2): 3}),
                       (["--topic", t, "--partitions", "1,2"], {(t, 1): 2, (t, 2): 3}),
                       (["--topic-partitions", f"{t}:1-"], {(t, 1): 2, (t, 2): 3})):
        r = ctx.both("kafka-get-offsets", BS + args)
        ctx.same(" ".join(args), sorted_lines(r[KAFKA].out), sorted_lines(r[RINGLOG].out))
        for b in BROKERS:
            ctx.expect(b, parse_offsets(r[b].out) == want, f"{' '.join(args)}: {parse_offsets(r[b].out)}, want {want}")


@check("tools.kafka-delete-records")
def delete_records(ctx):
    t = ctx.name("delrec")
    create_topic(ctx, t, 1)
    ctx.per_broker(lambda b: produce_keyed(ctx, b, t, [(f"k{i}", f"v{i}") for i in range(10)]))
    with tempfile.TemporaryDirectory(prefix="peer-tools-") as d:
        ok_json = os.path.join(d, "ok.json")
        bad_json = os.path.join(d, "bad.json")
        with open(ok_json, "w") as f:
            json.dump({"partitions": [{"topic": t, "partition": 0, "offset": 4}], "version": 1}, f)
        with open(bad_json, "w") as f:
            json.dump({"partitions": [{"topic": t, "partition": 0, "offset": 100}], "version": 1}, f)
        r = ctx.both("kafka-delete-records", BS + ["--offset-json-file", ok_json])
        ctx.same("delete-records output", r[KAFKA].out, r[RINGLOG].out)
        for b in BROKERS:
            ctx.expect(b, f"partition: {t}-0\tlow_watermark: 4" in r[b].out, f"printed {r[b].out!r}")
        e = ctx.both("kafka-delete-records", BS + ["--offset-json-file", bad_json], ok=False)
        ctx.same("delete-records past the end", (e[KAFKA].rc, e[KAFKA].error_class()),
                 (e[RINGLOG].rc, e[RINGLOG].error_class()))
        for b in BROKERS:
            ctx.expect(b, e[b].error_class() == "OffsetOutOfRangeException", f"past the end: {e[b].summary(200)}")
    for spec in (-2, -4):
        o = ctx.per_broker(lambda b: get_offsets(ctx, b, t, spec)[1])
        for b in BROKERS:
            ctx.expect(b, o[b] == {0: 4}, f"--time {spec} after deleting to 4: {o[b]}")
    c = ctx.per_broker(lambda b: consume_all(ctx, b, t, 6, partition=0)[1])
    for b in BROKERS:
        ctx.expect(b, [(x["off"], x["key"]) for x in c[b]] == [(i, f"k{i}") for i in range(4, 10)],
                   f"from the beginning after the delete: {[(x['off'], x['key']) for x in c[b]]}")


# Cluster-wide descriptions ---------------------------------------------------------------------


def parse_features(text):
    """kafka-features describe: {feature: (supported min, supported max, finalized level)}."""
    f = {}
    for line in text.splitlines():
        m = re.match(r"^Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                     r"FinalizedVersionLevel: (\S+)\s+Epoch: (\S+)", line.strip())
        if m:
            f[m.group(1)] = m.groups()[1:4]
    return f


@check("tools.kafka-features.describe")
def features(ctx):
    d = ctx.both("kafka-features", BS + ["describe"])
    feats = {}
    for b in BROKERS:
        f = parse_features(d[b].out)
        feats[b] = f
        ctx.expect(b, f, f"no features in {d[b].out!r}")
    for name, (lo, hi, fin) in feats[RINGLOG].items():
        if lo.isdigit() and hi.isdigit() and fin.isdigit():
            ctx.expect(RINGLOG, int(lo) <= int(fin) <= int(hi) or int(fin) == 0,
                       f"{name}: finalized {fin} outside {lo}..{hi}")
    for name in ("group.version", "transaction.version"):
        ctx.expect(RINGLOG, name in feats[RINGLOG], f"no {name}")
    if feats[KAFKA] != feats[RINGLOG]:
        ctx.diff("ringlog reports only group.version and transaction.version, at the levels it implements",
                 f"kafka {feats[KAFKA]} ringlog {feats[RINGLOG]}")


@check("tools.kafka-features.upgrade")
def features_upgrade(ctx):
    """kafka-features upgrade --feature group.version=LEVEL, at the level both finalize (a no-op
    upgrade), with --dry-run and without, and to a level past what either supports; a downgrade
    to 0, as a dry run (Kafka would disable the feature)."""
    feat = "group.version"
    before = ctx.per_broker(lambda b: parse_features(ctx.tool(b, "kafka-features", BS + ["describe"]).out))
    for b in BROKERS:
        ctx.expect(b, feat in before[b], f"no {feat} in describe: {before[b]}")
    if not all(feat in before[b] for b in BROKERS):
        ctx.fail(f"{feat} is not described on both")
    ctx.same(f"{feat}'s finalized level", before[KAFKA][feat][2], before[RINGLOG][feat][2])
    level = before[RINGLOG][feat][2]
    past = max(int(before[b][feat][1]) for b in BROKERS) + 4
    runs = [("dry-run", level, ["--dry-run"], f"{feat} can be upgraded to {level}."),
            ("execute", level, [], f"{feat} was upgraded to {level}."),
            ("past the supported levels", str(past), [], None)]
    for what, lvl, extra, ok_line in runs:
        r = ctx.both("kafka-features", BS + ["upgrade", "--feature", f"{feat}={lvl}"] + extra, ok=False)
        if ok_line:
            ctx.expect(KAFKA, r[KAFKA].rc == 0 and r[KAFKA].out.strip() == ok_line,
                       f"upgrade {what}: {r[KAFKA].summary()}")
        else:
            ctx.expect(KAFKA, r[KAFKA].rc != 0 and f"Invalid update version {lvl}" in r[KAFKA].out,
                       f"upgrade {what}: rc={r[KAFKA].rc} {one_line(r[KAFKA].both, 600)!r}")
        rr = r[RINGLOG]
        if ok_line:
            # The finalized level: a no-op, reported in Kafka's words.
            ctx.expect(RINGLOG, rr.rc == 0 and rr.out.strip() == ok_line,
                       f"upgrade {what}: rc={rr.rc} {one_line(rr.both, 600)!r}")
            ctx.same(f"upgrade {what}", r[KAFKA].out, rr.out)
        else:
            # Past what ringlog supports: INVALID_UPDATE_VERSION, the tool fails.
            ctx.expect(RINGLOG, rr.rc != 0 and f"Invalid update version {lvl} for feature {feat}" in rr.out,
                       f"upgrade {what}: rc={rr.rc} {one_line(rr.both, 600)!r}")
    # A downgrade Kafka accepts (group.version supported from 0); ringlog's features are fixed.
    r = ctx.both("kafka-features", BS + ["downgrade", "--feature", f"{feat}=0", "--dry-run"], ok=False)
    ctx.expect(KAFKA, r[KAFKA].rc == 0, f"downgrade dry-run: {r[KAFKA].summary()}")
    rr = r[RINGLOG]
    ctx.expect(RINGLOG, rr.rc != 0 and f"Invalid update version 0 for feature {feat}" in rr.out,
               f"downgrade dry-run: rc={rr.rc} {one_line(rr.both, 600)!r}")
    if r[KAFKA].rc == 0 and rr.rc != 0:
        ctx.diff("ringlog's features are fixed: a downgrade is refused", f"rc={rr.rc} {one_line(rr.out, 200)!r}")
    # Nothing changed, on either.
    after = ctx.per_broker(lambda b: parse_features(ctx.tool(b, "kafka-features", BS + ["describe"]).out))
    for b in BROKERS:
        ctx.expect(b, after[b] == before[b], f"the features changed: {before[b]} -> {after[b]}")


@check("tools.kafka-metadata-quorum.describe-status")
def quorum_status(ctx):
    d = ctx.both("kafka-metadata-quorum", BS + ["describe", "--status"])
    fields = {}
    for b in BROKERS:
        f = {}
        for line in d[b].out.splitlines():
            k, _, v = line.partition(":")
            f[k.strip()] = v.strip()
        fields[b] = f
        ctx.expect(b, f.get("ClusterId") == ctx.drv.cluster_id[b], f"ClusterId {f.get('ClusterId')!r}, "
                                                                    f"kafka-cluster says {ctx.drv.cluster_id[b]!r}")
        ctx.expect(b, f.get("LeaderId") == "1" and f.get("CurrentObservers") == "[]", f"{f}")
        ctx.expect(b, f.get("HighWatermark", "").isdigit(), f"HighWatermark {f.get('HighWatermark')!r}")

    def n(b):
        f = dict(fields[b])
        f["ClusterId"] = "C"
        f["HighWatermark"] = "HW"  # the metadata log's length: what each broker has done
        f["CurrentVoters"] = norm(ctx, b, f.get("CurrentVoters", ""))
        return f
    voters = ("ringlog's quorum voter endpoint is its client listener (PLAINTEXT://host:port), not a separate "
              "CONTROLLER listener",
              lambda f: dict(f, CurrentVoters=re.sub(r'"\w+://[^"]*"', '"ENDPOINT"', f.get("CurrentVoters", ""))))
    ctx.same("describe --status", n(KAFKA), n(RINGLOG), [voters])
    ctx.expect(RINGLOG, '"id": 1' in fields[RINGLOG].get("CurrentVoters", ""), "node 1 is not a voter")


@check("tools.kafka-metadata-quorum.describe-replication")
def quorum_replication(ctx):
    d = ctx.both("kafka-metadata-quorum", BS + ["describe", "--replication"])
    rows = {}
    for b in BROKERS:
        rs = table(d[b].out)
        rows[b] = [dict(r, LogEndOffset="LEO") for r in rs]
        for r in rs:
            ctx.expect(b, r.get("NodeId") == "1" and r.get("Status") == "Leader" and r.get("Lag") == "0", f"{r}")
        ctx.expect(b, len(rs) == 1, f"{len(rs)} rows")
    fetch = ("ringlog reports no fetch times for its only voter (-1): it fetches from no one",
             lambda rows: [dict(r, LastFetchTimestamp="T", LastCaughtUpTimestamp="T") for r in rows])
    ctx.same("describe --replication", [{k: ("TS" if TS_RE.fullmatch(v) else v) for k, v in r.items()} for r in rows[KAFKA]],
             [{k: ("TS" if TS_RE.fullmatch(v) else v) for k, v in r.items()} for r in rows[RINGLOG]], [fetch])


KAFKA_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


@check("tools.kafka-cluster.cluster-id")
def cluster_id(ctx):
    d = ctx.both("kafka-cluster", ["cluster-id"] + BS)
    for b in BROKERS:
        m = re.match(r"^Cluster ID: (\S+)$", d[b].out.strip())
        ctx.expect(b, m and m.group(1) == ctx.drv.cluster_id[b], f"printed {d[b].out!r}, before "
                                                                  f"{ctx.drv.cluster_id[b]!r}")
    ctx.same("cluster-id", norm(ctx, KAFKA, d[KAFKA].out), norm(ctx, RINGLOG, d[RINGLOG].out))
    if not KAFKA_CLUSTER_ID.match(ctx.drv.cluster_id[RINGLOG]):
        ctx.diff("ringlog's cluster id is not a Kafka-style base64 UUID (22 characters)",
                 ctx.drv.cluster_id[RINGLOG])


# Tools whose output lists what the broker implements.
TOOLS_NEED = ["Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
              "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "ApiVersions",
              "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
              "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit", "DescribeAcls",
              "CreateAcls", "DeleteAcls", "DescribeConfigs", "DescribeLogDirs", "CreatePartitions", "DeleteGroups",
              "IncrementalAlterConfigs", "OffsetDelete", "DescribeClientQuotas", "AlterClientQuotas",
              "DescribeUserScramCredentials", "AlterUserScramCredentials", "DescribeQuorum", "DescribeCluster",
              "DescribeProducers", "DescribeTransactions", "ListTransactions", "ConsumerGroupHeartbeat",
              "ConsumerGroupDescribe", "ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments",
              "SaslHandshake", "SaslAuthenticate", "DescribeTopicPartitions"]


def api_versions(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\w+)\((\d+)\): (.*?),?$", line)
        if m:
            out[m.group(1)] = m.group(3)
    return out


def api_fixture(ctx):
    d = ctx.both("kafka-broker-api-versions", BS)
    return {b: api_versions(d[b].out) for b in BROKERS} | {"raw": {b: d[b].out for b in BROKERS}}


APIS = Fixture("api-versions", api_fixture)


@check("tools.kafka-broker-api-versions.required", lane="api-versions")
def apis_required(ctx):
    a = APIS.get(ctx.drv, ctx)
    for b in BROKERS:
        ctx.expect(b, len(a[b]) > 50, f"only {len(a[b])} APIs listed")
        bad = [n for n in TOOLS_NEED if "usable" not in a[b].get(n, "")]
        ctx.expect(b, not bad, f"APIs the tools use are not usable: {bad}")
    ctx.same("the APIs listed", sorted(a[KAFKA]), sorted(a[RINGLOG]))
    hdr = {b: norm(ctx, b, a["raw"][b].splitlines()[0] if a["raw"][b] else "") for b in BROKERS}
    ctx.same("the broker line", hdr[KAFKA], hdr[RINGLOG])


@check("tools.kafka-broker-api-versions.compare", lane="api-versions")
def apis_compare(ctx):
    a = APIS.get(ctx.drv, ctx)
    k, r = a[KAFKA], a[RINGLOG]
    unsupported = sorted(n for n in k if "UNSUPPORTED" in r.get(n, "UNSUPPORTED") and "UNSUPPORTED" not in k[n])
    if unsupported:
        ctx.diff("ringlog does not implement some APIs (delegation tokens, share groups, streams groups, ...)",
                 f"{unsupported}")
    ranges = sorted(n for n in k if n in r and "UNSUPPORTED" not in r[n] and r[n] != k[n])
    if ranges:
        ctx.diff("ringlog's highest versions of some APIs are lower than Kafka 4.4's",
                 "; ".join(f"{n}: kafka {k[n]}, ringlog {r[n]}" for n in ranges))
    more = sorted(n for n in r if "UNSUPPORTED" not in r[n] and "UNSUPPORTED" in k.get(n, "UNSUPPORTED"))
    ctx.expect(RINGLOG, not more, f"APIs ringlog offers that Kafka 4.4 does not: {more}")


# Console, verifiable and perf tools -------------------------------------------------------------


@check("tools.kafka-console.keys-headers")
def console_keys_headers(ctx):
    t = ctx.name("console")
    create_topic(ctx, t, 3)
    recs = [("h1:a,h2:b", "key-1", "value one"), ("trace:xyz", "key-2", "second"), ("h1:a,h1:b", "key-1", "third"),
            ("empty:", "ключ", "unicode value ü"), ("h:1", "key-3", "with=equals"), ("x:y", "key-2", "sixth")]
    data = "".join(f"{h}\t{k}\t{v}\n" for h, k, v in recs)
    ctx.both("kafka-console-producer", BS + ["--topic", t, "--reader-property", "parse.key=true",
                                             "--reader-property", "parse.headers=true"], stdin=data)
    r = ctx.per_broker(lambda b: consume_all(ctx, b, t, len(recs)))
    lines = {b: sorted(TS_RE.sub("TS", l) for l in r[b][0].out.splitlines() if l.startswith("CreateTime:"))
             for b in BROKERS}
    ctx.same("records read back", "\n".join(lines[KAFKA]), "\n".join(lines[RINGLOG]))
    for b in BROKERS:
        got = r[b][1]
        ctx.expect(b, sorted((x["headers"], x["key"], x["value"]) for x in got) == sorted(recs),
                   f"records read back {[(x['headers'], x['key'], x['value']) for x in got]}")
        per = {}
        for h, k, v in recs:
            per.setdefault(partition_of(k, 3), []).append(v)
        got_per = {}
        for x in sorted(got, key=lambda x: (x["p"], x["off"])):
            got_per.setdefault(x["p"], []).append(x["value"])
        ctx.expect(b, got_per == per, f"partitions and order {got_per}, want {per} (Kafka's partitioner)")
        for p, xs in got_per.items():
            offs = sorted(x["off"] for x in got if x["p"] == p)
            ctx.expect(b, offs == list(range(len(xs))), f"partition {p} offsets {offs}")
    # One partition from an offset.
    p = partition_of("key-1", 3)
    o = ctx.both("kafka-console-consumer", BS + ["--topic", t, "--partition", str(p), "--offset", "1",
                                                 "--max-messages", "1", "--timeout-ms", "10000"] + PRINT_ALL)
    ctx.same("--partition P --offset 1", TS_RE.sub("TS", o[KAFKA].out), TS_RE.sub("TS", o[RINGLOG].out))
    for b in BROKERS:
        x = parse_records(o[b].out)
        ctx.expect(b, len(x) == 1 and x[0]["off"] == 1 and x[0]["p"] == p, f"--partition {p} --offset 1: {x}")


@check("tools.kafka-verifiable-producer")
def verifiable_producer(ctx):
    t = ctx.name("vprod")
    create_topic(ctx, t, 3)
    r = ctx.both("kafka-verifiable-producer", BS + ["--topic", t, "--max-messages", "300", "--acks", "-1"], timeout=90)
    ev = {}
    for b in BROKERS:
        evs = [json.loads(l) for l in r[b].out.splitlines() if l.startswith("{")]
        ev[b] = evs
        ok = [e for e in evs if e["name"] == "producer_send_success"]
        err = [e for e in evs if e["name"] == "producer_send_error"]
        data = [e for e in evs if e["name"] == "tool_data"]
        ctx.expect(b, len(ok) == 300 and not err, f"{len(ok)} sent, {len(err)} errors {err[:2]}")
        ctx.expect(b, data and data[0]["sent"] == 300 and data[0]["acked"] == 300, f"tool_data {data}")
        per = {}
        for e in ok:
            per.setdefault(e["partition"], []).append(e["offset"])
        ctx.expect(b, all(sorted(v) == list(range(len(v))) for v in per.values()),
                   "acknowledged offsets are not 0..n-1 on each partition")
        ctx.expect(b, sorted(int(e["value"]) for e in ok) == list(range(300)), "values are not 0..299")
    names = {b: sorted({e["name"] for e in ev[b]}) for b in BROKERS}
    ctx.same("event kinds", names[KAFKA], names[RINGLOG])
    o = ctx.per_broker(lambda b: get_offsets(ctx, b, t, -1)[1])
    for b in BROKERS:
        ctx.expect(b, sum(o[b].values()) == 300, f"end offsets {o[b]} (sum {sum(o[b].values())}), want 300 in all")


def vcons_fixture(ctx):
    t = ctx.name("vcons")
    create_topic(ctx, t, 3)
    ctx.both("kafka-verifiable-producer", BS + ["--topic", t, "--max-messages", "300", "--acks", "-1"], timeout=90)
    return t


VCONS = Fixture("verifiable-consumer", vcons_fixture)


def verifiable_consumer(ctx, protocol):
    t, g = VCONS.get(ctx.drv, ctx), ctx.name(f"vg-{protocol}")
    r = ctx.both("kafka-verifiable-consumer", BS + ["--topic", t, "--group-id", g, "--max-messages", "300",
                                                    "--reset-policy", "earliest", "--group-protocol", protocol],
                 timeout=90)
    kinds = {}
    for b in BROKERS:
        evs = [json.loads(l) for l in r[b].out.splitlines() if l.startswith("{")]
        kinds[b] = sorted({e["name"] for e in evs})
        consumed = sum(e["count"] for e in evs if e["name"] == "records_consumed")
        ctx.expect(b, consumed == 300, f"consumed {consumed}, want 300")
        assigned = sorted((p["topic"], p["partition"]) for e in evs if e["name"] == "partitions_assigned"
                          for p in e["partitions"])
        ctx.expect(b, assigned == [(t, 0), (t, 1), (t, 2)], f"assigned {assigned}")
        commits = [e for e in evs if e["name"] == "offsets_committed"]
        ctx.expect(b, commits and all(e.get("success") for e in commits), f"commits {commits[:2]}")
        last = {}
        for e in commits:
            for o in e.get("offsets", []):
                last[o["partition"]] = o["offset"]
        ctx.expect(b, sum(last.values()) == 300, f"last committed offsets {last}, want the log ends (sum 300)")
    ctx.same("event kinds", kinds[KAFKA], kinds[RINGLOG])
    d = ctx.per_broker(lambda b: group_offsets(ctx, b, g, t))
    e = ctx.per_broker(lambda b: get_offsets(ctx, b, t, -1)[1])
    for b in BROKERS:
        ends = {p: o for p, o in e[b].items() if o > 0}  # no commit on a partition without records
        ctx.expect(b, {p: o for p, o in d[b].items() if o > 0} == ends,
                   f"the group's committed offsets {d[b]}, log ends {e[b]}")


@check("tools.kafka-verifiable-consumer.classic", lane="verifiable-consumer")
def verifiable_consumer_classic(ctx):
    verifiable_consumer(ctx, "classic")


@check("tools.kafka-verifiable-consumer.consumer", lane="verifiable-consumer")
def verifiable_consumer_848(ctx):
    verifiable_consumer(ctx, "consumer")


PERF_RECORDS = 20000


def perf_fixture(ctx):
    t = ctx.name("perf")
    create_topic(ctx, t, 2)
    r = ctx.both("kafka-producer-perf-test", BS + ["--topic", t, "--num-records", str(PERF_RECORDS),
                                                   "--record-size", "200", "--throughput", "-1",
                                                   "--command-property", "acks=all", "linger.ms=5"], timeout=120)
    return {"topic": t, "out": {b: r[b].out for b in BROKERS}}


PERF = Fixture("perf", perf_fixture)


@check("tools.kafka-producer-perf-test", lane="perf")
def producer_perf(ctx):
    fx = PERF.get(ctx.drv, ctx)
    sent = {}
    for b in BROKERS:
        m = re.findall(r"^(\d+) records sent, [\d.]+ records/sec", fx["out"][b], re.M)
        sent[b] = int(m[-1]) if m else None
        ctx.expect(b, sent[b] == PERF_RECORDS, f"summary says {sent[b]} records sent: {fx['out'][b][-300:]!r}")
    ctx.same("records sent", sent[KAFKA], sent[RINGLOG])
    o = ctx.per_broker(lambda b: get_offsets(ctx, b, fx["topic"], -1)[1])
    for b in BROKERS:
        ctx.expect(b, sum(o[b].values()) == PERF_RECORDS, f"log ends {o[b]}, want {PERF_RECORDS} in all")


@check("tools.kafka-consumer-perf-test", lane="perf")
def consumer_perf(ctx):
    fx = PERF.get(ctx.drv, ctx)
    r = ctx.both("kafka-consumer-perf-test", BS + ["--topic", fx["topic"], "--num-records", str(PERF_RECORDS),
                                                   "--timeout", "30000", "--group", ctx.name("perfg")], timeout=90)
    got = {}
    for b in BROKERS:
        rows = [l.split(", ") for l in r[b].out.splitlines() if re.match(r"^\d{4}-", l)]
        ctx.expect(b, rows and len(rows[-1]) >= 5, f"no result line in {r[b].out!r}")
        if rows:
            got[b] = (rows[-1][2], int(rows[-1][4]))  # data.consumed.in.MB, data.consumed.in.nMsg
            ctx.expect(b, got[b][1] == PERF_RECORDS, f"consumed {got[b][1]} records, want {PERF_RECORDS}")
            ctx.expect(b, got[b][0] == f"{PERF_RECORDS * 200 / 1048576:.4f}", f"consumed {got[b][0]} MB")
    if len(got) == 2:
        ctx.same("records and MB consumed", got[KAFKA], got[RINGLOG])


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def read_differences(path):
    """{check id: its text} from lines "- `check-id` text..." (continuation lines joined)."""
    out, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\s*[-*]\s+`([A-Za-z0-9_.-]+)`\s*[:\u2014-]*\s*(.*)$", line)
            if m:
                cur = m.group(1)
                out[cur] = m.group(2).strip()
            elif cur and line.strip() and line.startswith((" ", "\t")):
                out[cur] += " " + line.strip()
            else:
                cur = None
    return out


def first_sentence(text):
    m = re.match(r"^(.*?[.!?])(\s|$)", text)
    s = (m.group(1) if m else text).replace("`", "").replace("**", "")
    return one_line(s, 240)


class Driver:
    def __init__(self, args):
        self.bootstrap = {KAFKA: args.kafka, RINGLOG: args.ringlog}
        self.runner = Runner(args.tool_runner)
        self.check_timeout = args.check_timeout
        self.run_id = uuid.uuid4().hex[:6]
        self.cluster_id = {}
        self.out_lock = threading.Lock()
        self.verbose = args.verbose

    def emit_log(self, name, log):
        with self.out_lock:
            print(f"--- {name} transcript ---", file=sys.stderr)
            for l in log:
                print(l, file=sys.stderr)
            sys.stderr.flush()

    def preflight(self):
        """Each broker answers, and its cluster id (normalised away in comparisons)."""
        def go(b):
            r = self.runner.run(b, "kafka-cluster", ["cluster-id", "--bootstrap-server", self.bootstrap[b]],
                                timeout=90)
            return r
        results = {}
        threads = [threading.Thread(target=lambda b=b: results.__setitem__(b, go(b))) for b in BROKERS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for b in BROKERS:
            r = results[b]
            if r.rc == 3 and "unavailable" in r.err:
                print(r.err.strip(), file=sys.stderr)
                print(f"peer_tools: Kafka's tools are unavailable: {r.err.strip()}")
                sys.exit(3)
            m = re.search(r"Cluster ID: (\S+)", r.out)
            if r.rc != 0 or not m:
                print(f"peer_tools: {b} at {self.bootstrap[b]} does not answer kafka-cluster cluster-id: "
                      f"{r.summary()}")
                sys.exit(2)
            self.cluster_id[b] = m.group(1)


def run_one(drv, cid, fn, listed):
    ctx = Ctx(drv, cid)
    t0 = time.monotonic()
    try:
        fn(ctx)
    except CheckAbort:
        pass
    except Exception as e:  # noqa: BLE001
        ctx.problem(f"driver error: {type(e).__name__}: {e}")
        ctx.note(traceback.format_exc())
    secs = time.monotonic() - t0
    if ctx.problems:
        status, line = "FAIL", f"FAIL {cid}: " + " ;; ".join(ctx.problems)
    elif ctx.diffs and cid in listed:
        status, line = "DIFF", f"DIFF-EXPECTED {cid}: {first_sentence(listed[cid])}"
    elif ctx.diffs:
        status, line = "FAIL", f"FAIL {cid}: unlisted difference: " + " ;; ".join(ctx.diffs)
    else:
        status, line = "PASS", f"PASS {cid}"
    stale = not ctx.diffs and not ctx.problems and cid in listed
    with drv.out_lock:
        if status != "PASS" or drv.verbose:
            print(f"--- {cid} ({secs:.1f}s) transcript ---", file=sys.stderr)
            for l in ctx.log:
                print(l, file=sys.stderr)
        print(line, flush=True)
        sys.stderr.flush()
    return status, stale, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ringlog", required=True, help="ringlog's HOST:PORT")
    ap.add_argument("--kafka", required=True, help="the Kafka peer's HOST:PORT")
    ap.add_argument("--tool-runner", default="scripts/kafka-peer.sh tool",
                    help="the command that runs a tool by name (default: %(default)s)")
    ap.add_argument("--differences", default="docs/kafka-differences.md",
                    help="the documented differences (default: %(default)s)")
    ap.add_argument("--only", help="run only the checks whose id matches this regular expression")
    ap.add_argument("--jobs", type=int, default=max(2, min(4, (os.cpu_count() or 2) // 2)),
                    help="lanes of checks run at once, each running its tools against both brokers at once "
                         "(default: half the CPUs, 2 to 4: %(default)s)")
    ap.add_argument("--check-timeout", type=float, default=150.0, help="seconds per check (default: %(default)s)")
    ap.add_argument("--list", action="store_true", help="list the check ids and exit")
    ap.add_argument("--verbose", action="store_true", help="print every check's transcript to stderr")
    args = ap.parse_args()

    if args.list:
        for cid, _, _ in CHECKS:
            print(cid)
        return 0
    try:
        listed = read_differences(args.differences)
    except OSError as e:
        print(f"peer_tools: cannot read --differences {args.differences}: {e}")
        return 2
    # The file also lists other tests' differences (protocol.*): only tools.* ids are ours.
    unknown = sorted(i for i in set(listed) - {cid for cid, _, _ in CHECKS} if i.startswith("tools."))
    drv = Driver(args)
    t_start = time.monotonic()
    try:
        drv.preflight()
        selected = [c for c in CHECKS if not args.only or re.search(args.only, c[0])]
        lanes = {}
        for cid, lane, fn in selected:
            lanes.setdefault(lane, []).append((cid, fn))
        # Longest lanes first, so that they overlap the short ones.
        order = sorted(lanes, key=lambda l: -len(lanes[l]))
        results, rlock = {}, threading.Lock()
        queue = list(order)

        def worker():
            while True:
                with rlock:
                    if not queue:
                        return
                    lane = queue.pop(0)
                for cid, fn in lanes[lane]:
                    res = run_one(drv, cid, fn, listed)
                    with rlock:
                        results[cid] = res
        workers = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, args.jobs))]
        for w in workers:
            w.start()
        # A check ends by itself (every tool call is bounded by the check's deadline); the
        # grace below only guards against a driver bug.
        deadline = time.monotonic() + args.check_timeout * (len(selected) + 1) + 60
        for w in workers:
            w.join(max(0, deadline - time.monotonic()))
        for cid, _, _ in selected:
            if cid not in results:
                print(f"FAIL {cid}: did not finish (driver hung)", flush=True)
                results[cid] = ("FAIL", False, 0)
    finally:
        drv.runner.kill_all()

    passed = sum(1 for s, _, _ in results.values() if s in ("PASS", "DIFF"))
    failed = sum(1 for s, _, _ in results.values() if s == "FAIL")
    expected = sum(1 for s, _, _ in results.values() if s == "DIFF")
    stale = sorted(cid for cid, (_, st, _) in results.items() if st)
    if stale:
        print(f"note: listed in {args.differences} but no difference seen (remove the entries?): {', '.join(stale)}")
    if unknown:
        print(f"note: {args.differences} lists ids no check has: {', '.join(unknown)}")
    slow = sorted(results.items(), key=lambda kv: -kv[1][2])[:3]
    print(f"time: {time.monotonic() - t_start:.0f}s, {drv.runner.count} tool runs; slowest: "
          + ", ".join(f"{cid} {r[2]:.0f}s" for cid, r in slow), file=sys.stderr)
    print(f"expected differences: {expected} (listed in {args.differences})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
