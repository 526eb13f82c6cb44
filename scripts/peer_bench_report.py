#!/usr/bin/env python3
"""Summary of a scripts/peer-bench.sh run: OUT/summary.md (a table per comparison: ringlog,
Kafka, ringlog / Kafka) and OUT/summary.json; with --plot PNG, a chart of the ratios
(needs matplotlib).

usage: peer_bench_report.py [--plot PNG] OUT
"""
import csv
import json
import os
import re
import sys

MODE_LABEL = {
    "default": "Kafka 4.4.0 default (acks from the page cache, no fsync)",
    "durable": "Kafka 4.4.0 durable (log.flush.interval.messages=1: fsync before the ack)",
}
MODE_SHORT = {"default": "Kafka default", "durable": "Kafka durable"}


def fmt(x, digits=None):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if digits is not None:
        return f"{x:,.{digits}f}"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 10:
        return f"{x:.2f}"
    return f"{x:.3f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def rfmt(r):
    return "–" if r is None else f"{r:.2f}×"


def read_cases(out):
    with open(os.path.join(out, "cases.tsv")) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def bench_case(out, case):
    path = os.path.join(out, case["id"], "result.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rep = json.load(f)
    aggs = {a["broker"]: a for a in rep.get("aggregate", [])}
    if "A" not in aggs or "B" not in aggs:
        return None
    rows = []

    def s(label, key, sub=None):
        va = aggs["A"]["summary"].get(key)
        vb = aggs["B"]["summary"].get(key)
        if sub is not None:
            va = va.get(sub) if va else None
            vb = vb.get(sub) if vb else None
        rows.append((label, va, vb))

    s("publish rate (msg/s)", "publish_rate")
    s("publish MiB/s", "publish_mb_s")
    s("consume rate (msg/s)", "consume_rate")
    s("publish latency p50 (ms)", "publish_latency", "p50_ms")
    s("publish latency p99 (ms)", "publish_latency", "p99_ms")
    s("publish latency p99.9 (ms)", "publish_latency", "p999_ms")
    s("publish latency max (ms)", "publish_latency", "max_ms")
    s("end-to-end latency p50 (ms)", "end_to_end_latency", "p50_ms")
    s("end-to-end latency p99 (ms)", "end_to_end_latency", "p99_ms")
    s("end-to-end latency p99.9 (ms)", "end_to_end_latency", "p999_ms")
    if any(aggs[x]["summary"].get("backlog_drain_secs") is not None for x in "AB"):
        s("backlog drain (s)", "backlog_drain_secs")
    ca, cb = aggs["A"]["counts"], aggs["B"]["counts"]
    rows.append(("publish / consume errors", f"{ca['publish_errors']} / {ca['consume_errors']}",
                 f"{cb['publish_errors']} / {cb['consume_errors']}"))
    rows.append(("consumed / expected", f"{ca['consumed']:,} / {ca['expected_consumed']:,}",
                 f"{cb['consumed']:,} / {cb['expected_consumed']:,}"))
    probe = rep.get("fsync_probe")
    notes = sorted({n for r in rep.get("runs", []) for n in r.get("notes", [])})
    return {
        "creation": creation_text(out, case),
        "rows": rows,
        "probe": probe,
        "p99_over_fsync": (aggs["A"].get("publish_p99_over_fsync_p99"),
                           aggs["B"].get("publish_p99_over_fsync_p99")),
        "runs": len(rep.get("runs", [])),
        "notes": notes,
        "measured_secs": rep.get("test_duration_secs"),
    }


PROD_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def perf_case(out, case):
    d = os.path.join(out, case["id"])
    res = {}
    for who in ("ringlog", "kafka"):
        prods, cons = [], []
        for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if not fn.startswith(who + "-r"):
                continue
            p = os.path.join(d, fn)
            if fn.endswith("-producer.txt"):
                with open(p) as f:
                    for line in f:
                        m = PROD_RE.search(line)
                        if m:
                            prods.append([float(x) for x in m.groups()])
            elif fn.endswith("-consumer.txt"):
                with open(p) as f:
                    lines = [ln.strip() for ln in f if ln.strip()]
                hdr = next((i for i, ln in enumerate(lines) if ln.startswith("start.time")), None)
                if hdr is not None and hdr + 1 < len(lines):
                    keys = [k.strip() for k in lines[hdr].split(",")]
                    vals = [v.strip() for v in lines[hdr + 1].split(",")]
                    cons.append(dict(zip(keys, vals)))
        mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
        r = {}
        if prods:
            cols = ["records", "rate", "mb_s", "avg_ms", "max_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms"]
            for i, c in enumerate(cols):
                r["producer_" + c] = mean([p[i] for p in prods])
        if cons:
            for k in ("fetch.nMsg.sec", "fetch.MB.sec", "nMsg.sec", "MB.sec", "rebalance.time.ms"):
                try:
                    r["consumer_" + k] = mean([float(c[k]) for c in cons if k in c])
                except ValueError:
                    pass
        r["rounds"] = max(len(prods), len(cons))
        res[who] = r
    rows = []
    for label, key in [
        ("producer records/s", "producer_rate"),
        ("producer MB/s (tool's MB = MiB)", "producer_mb_s"),
        ("producer latency avg (ms)", "producer_avg_ms"),
        ("producer latency p50 (ms)", "producer_p50_ms"),
        ("producer latency p99 (ms)", "producer_p99_ms"),
        ("producer latency p99.9 (ms)", "producer_p999_ms"),
        ("producer latency max (ms)", "producer_max_ms"),
        ("consumer records/s (fetch.nMsg.sec)", "consumer_fetch.nMsg.sec"),
        ("consumer MB/s (fetch.MB.sec)", "consumer_fetch.MB.sec"),
        ("consumer group join (rebalance.time.ms)", "consumer_rebalance.time.ms"),
    ]:
        rows.append((label, res["ringlog"].get(key), res["kafka"].get(key)))
    if not any(a is not None or b is not None for _, a, b in rows):
        return None
    return {"rows": rows, "probe": None, "p99_over_fsync": (None, None),
            "runs": res["ringlog"].get("rounds", 0) + res["kafka"].get("rounds", 0), "notes": []}


def creation_text(out, case):
    p = os.path.join(out, case["id"], "creation.txt")
    if os.path.exists(p):
        with open(p) as f:
            return f.read().strip()
    return None


def failure(out, case):
    p = os.path.join(out, case["id"], "failure.txt")
    if os.path.exists(p):
        with open(p) as f:
            return f.read().strip()
    return None


def build(out):
    cases = read_cases(out)
    items = []
    for c in cases:
        if c["case"] == "perf":
            data = perf_case(out, c)
        else:
            data = bench_case(out, c)
        items.append({"case": c, "data": data, "failure": failure(out, c) if c["rc"] != "0" else None})
    return items


def markdown(out, items):
    lines = []
    with open(os.path.join(out, "machine.txt")) as f:
        lines.append("```\n" + f.read().rstrip() + "\n```\n")
    lines.append("Ratio = ringlog / Kafka for every figure: above 1 on a rate means ringlog is "
                 "faster, below 1 on a latency means ringlog is quicker. A = ringlog (acks=all, "
                 "every acknowledged record fdatasync'd), B = Kafka in the mode named.\n")
    for it in items:
        c, d = it["case"], it["data"]
        mode = MODE_LABEL.get(c["mode"], c["mode"])
        lines.append(f"### {c['id']}: {c['title']}\n")
        lines.append(f"ringlog vs {mode}. Load (1/5/15 min) before: {c['load_before']}; after: "
                     f"{c['load_after']}; took {c['secs']} s; exit status {c['rc']}.\n")
        if d is None:
            lines.append("No result.\n")
        else:
            lines.append(f"| figure | ringlog | {MODE_SHORT.get(c['mode'], 'Kafka')} | ringlog / Kafka |")
            lines.append("|---|---:|---:|---:|")
            for label, a, b in d["rows"]:
                r = ratio(a, b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
                lines.append(f"| {label} | {fmt(a)} | {fmt(b)} | {rfmt(r)} |")
            lines.append("")
            p = d.get("probe")
            if p:
                fd = p["fdatasync"]
                lines.append(f"fsync probe ({p['writes']} × 4 KiB O_DIRECT write + fdatasync on the "
                             f"data disk): fdatasync p50 {fmt(fd['p50_ms'])} ms, p99 "
                             f"{fmt(fd['p99_ms'])} ms, p99.9 {fmt(fd['p999_ms'])} ms "
                             f"({p['syncs_per_sec']:.0f} syncs/s). Publish p99 / fdatasync p99: "
                             f"ringlog {fmt(d['p99_over_fsync'][0])}, Kafka "
                             f"{fmt(d['p99_over_fsync'][1])}.\n")
            if d.get("creation"):
                lines.append("Partition creation, from each broker's log:\n\n```\n" + d["creation"] + "\n```\n")
            if d.get("notes"):
                lines.append("Notes from the bench: " + "; ".join(d["notes"]) + "\n")
        if it["failure"]:
            lines.append("Failure:\n\n```\n" + it["failure"] + "\n```\n")
    return "\n".join(lines)


def plot(items, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in ("default", "durable") if any(it["case"]["mode"] == m for it in items)]
    want = [("publish rate (msg/s)", "publish msg/s"),
            ("publish latency p99 (ms)", "publish p99"),
            ("end-to-end latency p99 (ms)", "end-to-end p99"),
            ("producer records/s", "publish msg/s"),
            ("producer latency p99 (ms)", "publish p99"),
            ("backlog drain (s)", "backlog drain time")]
    short_names = {"low": "low\n1k msg/s, 1 part.", "mid": "mid\n20k msg/s", "max": "max\nmax rate",
                   "lz4": "lz4\nmax rate", "zstd": "zstd\nmax rate", "p1000": "p1000\n1,000 part.",
                   "p10000": "p10000\n9,999 part.", "perf": "perf\nJava perf tools",
                   "backlog": "backlog\n1 GiB drain", "rf3": "rf3\n3 nodes", "rf3mid": "rf3mid\n3 nodes"}
    fig, axes = plt.subplots(len(modes), 1, figsize=(12, 4.6 * len(modes)), squeeze=False)
    colors = {"publish msg/s": "#2b7bba", "publish p99": "#e07b39", "end-to-end p99": "#7a5195",
              "backlog drain time": "#4c9a2a"}
    for ax, m in zip(axes[:, 0], modes):
        sel = [it for it in items if it["case"]["mode"] == m]
        names, vals, zero = [], [], []
        for i, it in enumerate(sel):
            d = it["data"]
            got = {}
            if d:
                for label, a, b in d["rows"]:
                    for w, short in want:
                        if label == w and isinstance(a, (int, float)) and isinstance(b, (int, float)):
                            if b:
                                got[short] = a / b
                            elif a and short == "publish msg/s":
                                zero.append(i)  # Kafka acknowledged nothing
            c = it["case"]["case"]
            names.append(short_names.get(c, c) + ("" if it["case"]["rc"] == "0" else "\n(failed)"))
            vals.append(got)
        series = [x for x in ["publish msg/s", "publish p99", "end-to-end p99", "backlog drain time"]
                  if any(x in v for v in vals)]
        width = 0.8 / max(len(series), 1)
        for k, sname in enumerate(series):
            xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(names))]
            ys = [v.get(sname) for v in vals]
            bx = [x for x, y in zip(xs, ys) if y]
            by = [y for y in ys if y]
            # Bars grow from 1 (parity) up or down to the ratio.
            ax.bar(bx, [y - 1 for y in by], width, bottom=1, label=f"{sname}: ringlog / Kafka",
                   color=colors[sname])
            for x, y in zip(bx, by):
                ax.annotate(f"{y:.2g}", (x, y), ha="center",
                            va="bottom" if y >= 1 else "top", fontsize=7)
        for i in zero:
            ax.annotate("Kafka acked\n0 msg/s", (i - 0.3, 1.15), ha="center", va="bottom", fontsize=7,
                        color=colors["publish msg/s"])
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(f"ringlog vs {MODE_LABEL[m]}", fontsize=10)
        ax.set_ylabel("ringlog / Kafka (log scale)")
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.suptitle("ringlog / Kafka 4.4.0, each pair from one run on the same machine: "
                 "rate > 1 = ringlog faster; latency or drain time < 1 = ringlog quicker", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv):
    png = None
    if len(argv) >= 2 and argv[0] == "--plot":
        png = argv[1]
        argv = argv[2:]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[0]
    items = build(out)
    if png:
        plot(items, png)
        print(png)
        return 0
    md = markdown(out, items)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump([{"case": it["case"], "data": it["data"], "failure": it["failure"]} for it in items],
                  f, indent=1, default=str)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
