"""Many partitions (issue #13): produce to, and read back from, a sample of a broker's
partitions, with confluent-kafka.

usage: scale_check.py BOOTSTRAP MODE TOPIC_PREFIX TOPICS PARTITIONS SAMPLE SEED [ROUNDS]

  The topics are TOPIC_PREFIX0 .. TOPIC_PREFIX{TOPICS-1}, each with PARTITIONS partitions;
  TOPICS 0 names one topic, TOPIC_PREFIX itself.

  produce  writes ROUNDS records (default 1) to each of SAMPLE partitions chosen by SEED
           (explicit partitions, acks=all), one pass over the sample per round; prints the
           count acknowledged; any delivery error fails
  verify   reads each sampled partition from offset 0 and checks it holds exactly the
           records `produce` acknowledged for it with the same SEED (and ROUNDS), in order;
           SEED may list several (`13,14`): the samples' records in that order
  rr       as produce, but over every partition of every topic, round-robin (SAMPLE unused)

Prints SUMMARY (JSON) as its last stdout line.
"""
import json
import random
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from suite import check, fail, step, SUMMARY


def sample(prefix, topics, partitions, n, seed):
    rng = random.Random(seed)
    names = [prefix] if topics == 0 else [f"{prefix}{t}" for t in range(topics)]
    every = [(name, p) for name in names for p in range(partitions)]
    if n >= len(every):
        return every
    return sorted(rng.sample(every, n))


def value(topic, p, seed, r):
    return f"{topic}/{p}/{seed}/{r}".encode()


def produce(bootstrap, targets, seed, rounds):
    acked = [0]
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(f"{msg.topic()}/{msg.partition()}: {err}")
        else:
            acked[0] += 1

    pr = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120000,
        "queue.buffering.max.messages": 1000000,
    })
    started = time.time()
    for r in range(rounds):
        for topic, p in targets:
            while True:
                try:
                    pr.produce(topic, value(topic, p, seed, r), partition=p, on_delivery=cb)
                    break
                except BufferError:
                    pr.poll(0.1)
            pr.poll(0)
    left = pr.flush(180)
    check(left == 0, f"{left} records not delivered in 180 s")
    check(not errors, f"{len(errors)} delivery errors, first: {errors[:3]}")
    SUMMARY["acked"] = acked[0]
    SUMMARY["produce_secs"] = round(time.time() - started, 3)


def verify(bootstrap, want, rounds):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "scale-verify",
        "enable.auto.commit": False,
        "isolation.level": "read_uncommitted",
    })
    got = {k: [] for k in want}
    c.assign([TopicPartition(t, p, 0) for t, p in want])
    deadline = time.time() + 180
    missing = sum(len(w) for w in want.values())
    while missing > 0 and time.time() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                fail(f"consume error: {m.error()}")
            k = (m.topic(), m.partition())
            got[k].append(m.value())
            missing -= 1
    c.close()
    for k, w in want.items():
        check(got[k] == w, f"{k[0]}/{k[1]} holds {got[k][:3]}..., expected {w[:3]}...")
    SUMMARY["verified_partitions"] = len(want)


def main():
    bootstrap, mode, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    topics, partitions, n = (int(a) for a in sys.argv[4:7])
    seeds = [int(x) for x in sys.argv[7].split(",")]
    rounds = int(sys.argv[8]) if len(sys.argv) > 8 else 1
    if mode == "rr":
        n = max(topics, 1) * partitions
        mode = "produce"
    if mode == "produce":
        check(len(seeds) == 1, "produce takes one seed")
        targets = sample(prefix, topics, partitions, n, seeds[0])
        step(f"produce {len(targets)} partitions x {rounds}")
        produce(bootstrap, targets, seeds[0], rounds)
    elif mode == "verify":
        want = {}
        for seed in seeds:
            for t, p in sample(prefix, topics, partitions, n, seed):
                want.setdefault((t, p), []).extend(value(t, p, seed, r) for r in range(rounds))
        step(f"verify {len(want)} partitions x {rounds}")
        verify(bootstrap, want, rounds)
    else:
        fail(f"unknown mode {mode}")
    print(json.dumps(SUMMARY))


if __name__ == "__main__":
    main()
