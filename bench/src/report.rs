//! Outputs: `result.json`, `latency.hlog` (HdrHistogram interval log) and `report.html`
//! (self-contained: inline CSS and hand-written SVG, no scripts, no network).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::probe::FsyncProbe;
use crate::run::{ClientOptions, Counts, RunOutcome, RunResult, Summary};
use crate::stats::{self, Percentiles};
use crate::workload::Workload;

#[derive(Clone, Debug, Serialize)]
pub struct BrokerRef {
    pub label: String,
    pub address: String,
}

/// Every run of one broker merged: histograms merged, rates weighted by measured time.
#[derive(Clone, Debug, Serialize)]
pub struct Aggregate {
    pub broker: String,
    pub address: String,
    pub runs: usize,
    pub counts: Counts,
    pub summary: Summary,
    /// publish p99 / disk fdatasync p99 (with --fsync-probe).
    pub publish_p99_over_fsync_p99: Option<f64>,
    pub e2e_p99_over_fsync_p99: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    pub figure: String,
    pub a: f64,
    pub b: f64,
    /// b / a
    pub ratio: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub tool: String,
    pub version: String,
    /// The Kafka client library that produced and consumed.
    pub driver: String,
    pub started_unix_s: f64,
    pub command_line: Vec<String>,
    pub workload_file: Option<String>,
    pub workload: Workload,
    pub test_duration_secs: f64,
    pub warmup_secs: f64,
    pub client: ClientOptions,
    pub brokers: Vec<BrokerRef>,
    pub runs: Vec<RunResult>,
    pub aggregate: Vec<Aggregate>,
    /// With --compare: each figure for A and B and B/A.
    pub comparison: Option<Vec<CompareRow>>,
    pub fsync_probe: Option<FsyncProbe>,
    pub notes: Vec<String>,
}

pub struct MergedHists {
    pub label: String,
    pub publish: Histogram<u64>,
    pub e2e: Histogram<u64>,
}

/// Aggregates per broker (in `brokers` order) and their merged histograms.
pub fn aggregate(
    brokers: &[BrokerRef],
    outcomes: &[RunOutcome],
    probe: Option<&FsyncProbe>,
) -> (Vec<Aggregate>, Vec<MergedHists>) {
    let mut aggs = Vec::new();
    let mut hists = Vec::new();
    for b in brokers {
        let runs: Vec<&RunOutcome> = outcomes
            .iter()
            .filter(|o| o.result.broker == b.label)
            .collect();
        let mut publish = stats::new_hist();
        let mut e2e = stats::new_hist();
        let mut counts = Counts::default();
        let mut secs = 0.0;
        let (mut pr, mut pmb, mut cr, mut cmb) = (0.0, 0.0, 0.0, 0.0);
        let mut s = Summary::default();
        let mut drains = Vec::new();
        for o in &runs {
            publish.add(&o.publish).expect("bounds");
            e2e.add(&o.e2e).expect("bounds");
            let c = &o.result.counts;
            counts.sent += c.sent;
            counts.acked += c.acked;
            counts.publish_errors += c.publish_errors;
            counts.consumed += c.consumed;
            counts.expected_consumed += c.expected_consumed;
            counts.consume_errors += c.consume_errors;
            counts.foreign_records += c.foreign_records;
            if c.last_publish_error.is_some() {
                counts.last_publish_error = c.last_publish_error.clone();
            }
            if c.last_consume_error.is_some() {
                counts.last_consume_error = c.last_consume_error.clone();
            }
            let rs = &o.result.summary;
            secs += rs.measured_secs;
            pr += rs.rates.publish_rate * rs.measured_secs;
            pmb += rs.rates.publish_mb_s * rs.measured_secs;
            cr += rs.rates.consume_rate * rs.measured_secs;
            cmb += rs.rates.consume_mb_s * rs.measured_secs;
            s.rates.publish_errors += rs.rates.publish_errors;
            s.rates.consume_errors += rs.rates.consume_errors;
            s.max_backlog = s.max_backlog.max(rs.max_backlog);
            if let Some(d) = rs.backlog_drain_secs {
                drains.push(d);
            }
        }
        if secs > 0.0 {
            s.rates.publish_rate = pr / secs;
            s.rates.publish_mb_s = pmb / secs;
            s.rates.consume_rate = cr / secs;
            s.rates.consume_mb_s = cmb / secs;
        }
        s.measured_secs = secs;
        s.publish_latency = Percentiles::of(&publish);
        s.end_to_end_latency = Percentiles::of(&e2e);
        if !drains.is_empty() {
            s.backlog_drain_secs = Some(drains.iter().sum::<f64>() / drains.len() as f64);
        }
        let fs = probe.map(|p| p.fdatasync.p99_ms).filter(|v| *v > 0.0);
        aggs.push(Aggregate {
            broker: b.label.clone(),
            address: b.address.clone(),
            runs: runs.len(),
            counts,
            publish_p99_over_fsync_p99: fs.map(|f| s.publish_latency.p99_ms / f),
            e2e_p99_over_fsync_p99: fs.map(|f| s.end_to_end_latency.p99_ms / f),
            summary: s,
        });
        hists.push(MergedHists {
            label: b.label.clone(),
            publish,
            e2e,
        });
    }
    (aggs, hists)
}

fn summary_figures(s: &Summary) -> Vec<(String, f64)> {
    let mut v = vec![
        ("publish rate (msg/s)".to_string(), s.rates.publish_rate),
        ("publish MB/s".to_string(), s.rates.publish_mb_s),
        ("consume rate (msg/s)".to_string(), s.rates.consume_rate),
        ("consume MB/s".to_string(), s.rates.consume_mb_s),
        ("publish errors".to_string(), s.rates.publish_errors as f64),
        ("consume errors".to_string(), s.rates.consume_errors as f64),
        ("max backlog (records)".to_string(), s.max_backlog as f64),
    ];
    for (n, x) in s.publish_latency.fields() {
        v.push((format!("publish latency {n} (ms)"), x));
    }
    for (n, x) in s.end_to_end_latency.fields() {
        v.push((format!("end-to-end latency {n} (ms)"), x));
    }
    v
}

pub fn compare(a: &Aggregate, b: &Aggregate) -> Vec<CompareRow> {
    summary_figures(&a.summary)
        .into_iter()
        .zip(summary_figures(&b.summary))
        .map(|((name, x), (_, y))| CompareRow {
            figure: name,
            a: x,
            b: y,
            ratio: if x != 0.0 { Some(y / x) } else { None },
        })
        .collect()
}

/// Writes the interval log: one tagged histogram per run, interval and kind
/// (`A.r1.publish`, `A.r1.e2e`), values in µs (max column in ms).
pub fn write_hlog(path: &Path, outcomes: &[RunOutcome], driver: &str) -> Result<(), String> {
    let base = outcomes
        .iter()
        .map(|o| o.started_at)
        .min()
        .unwrap_or_else(SystemTime::now);
    let mut out = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment("ringlog-bench latency interval log; values in microseconds")
            .add_comment(&format!("driver: {driver}"))
            .add_comment("tags: <broker>.r<round>.publish | <broker>.r<round>.e2e")
            .with_start_time(base)
            .with_base_time(base)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut out, &mut ser)
            .map_err(|e| format!("hlog: {e}"))?;
        w.write_comment("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")
            .map_err(|e| format!("hlog: {e}"))?;
        for o in outcomes {
            let off = o.started_at.duration_since(base).unwrap_or(Duration::ZERO);
            for (kind, idx) in [("publish", 0), ("e2e", 1)] {
                let tag = format!("{}.r{}.{kind}", o.result.broker, o.result.round);
                for (start, len, p, e) in &o.interval_hists {
                    let h = if idx == 0 { p } else { e };
                    w.write_histogram(h, off + *start, *len, Tag::new(&tag))
                        .map_err(|e| format!("hlog: {e:?}"))?;
                }
            }
        }
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

// ------------------------------------------------------------------------------------------
// HTML and SVG
// ------------------------------------------------------------------------------------------

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Series {
    name: String,
    color: &'static str,
    dashed: bool,
    pts: Vec<(f64, f64)>,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn nice_step(range: f64, target: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n < 1.5 {
        1.0
    } else if n < 3.0 {
        2.0
    } else if n < 7.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{:.2}", v)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{:.4}", v)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A line chart. `xticks` = Some(custom ticks) or None for numeric ticks.
fn svg_chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    xticks: Option<Vec<(f64, String)>>,
) -> String {
    let (w, h) = (820.0, 380.0);
    let (ml, mr, mt, mb) = (75.0, 44.0, 34.0, 52.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let all = series.iter().flat_map(|s| s.pts.iter());
    let (mut xmin, mut xmax, mut ymax) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in all {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        if y.is_finite() {
            ymax = ymax.max(y);
        }
    }
    if let Some(t) = &xticks {
        for (x, _) in t {
            xmin = xmin.min(*x);
            xmax = xmax.max(*x);
        }
    }
    if !xmin.is_finite() {
        xmin = 0.0;
        xmax = 1.0;
    }
    if xmax <= xmin {
        xmax = xmin + 1.0;
    }
    if ymax <= 0.0 {
        ymax = 1.0;
    }
    let ystep = nice_step(ymax, 6.0);
    let ytop = (ymax / ystep).ceil() * ystep;
    let sx = |x: f64| ml + (x - xmin) / (xmax - xmin) * pw;
    let sy = |y: f64| mt + ph - (y / ytop) * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/><text x="{}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"##,
        w / 2.0,
        esc(title)
    );
    // y grid
    let mut y = 0.0;
    while y <= ytop + ystep * 0.01 {
        let py = sy(y);
        let _ = write!(
            s,
            r##"<line x1="{ml}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 6.0,
            py + 4.0,
            fmt_num(y)
        );
        y += ystep;
    }
    // x grid
    let ticks = xticks.unwrap_or_else(|| {
        let step = nice_step(xmax - xmin, 8.0);
        let mut v = Vec::new();
        let mut x = (xmin / step).ceil() * step;
        while x <= xmax + step * 0.01 {
            v.push((x, fmt_num(x)));
            x += step;
        }
        v
    });
    for (x, label) in &ticks {
        let px = sx(*x);
        let _ = write!(
            s,
            r##"<line x1="{px:.1}" y1="{mt}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            mt + ph,
            mt + ph + 16.0,
            esc(label)
        );
    }
    let _ = write!(
        s,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        ml + pw / 2.0,
        h - 10.0,
        esc(xlabel),
        mt + ph / 2.0,
        esc(ylabel)
    );
    for (i, se) in series.iter().enumerate() {
        if se.pts.is_empty() {
            continue;
        }
        let pts: Vec<String> = se
            .pts
            .iter()
            .filter(|(_, y)| y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let dash = if se.dashed {
            r#" stroke-dasharray="6,3""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8"{dash} points="{}"/>"#,
            se.color,
            pts.join(" ")
        );
        let ly = mt + 14.0 + i as f64 * 16.0;
        let _ = write!(
            s,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}" fill="#222">{}</text>"##,
            ml + 10.0,
            ly - 4.0,
            ml + 34.0,
            ly - 4.0,
            se.color,
            ml + 40.0,
            ly,
            esc(&se.name)
        );
    }
    s.push_str("</svg>");
    s
}

fn percentile_ticks(max_x: f64) -> Vec<(f64, String)> {
    let labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"];
    labels
        .iter()
        .enumerate()
        .take(((max_x - 0.01).ceil().max(1.0) as usize + 1).min(labels.len()))
        .map(|(i, l)| (i as f64, l.to_string()))
        .collect()
}

fn table(rows: &[Vec<String>], header: &[&str]) -> String {
    let mut s = String::from("<table><tr>");
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

fn f(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

pub fn html(report: &Report, outcomes: &[RunOutcome], merged: &[MergedHists]) -> String {
    let mut s = String::new();
    let title = format!("ringlog-bench: {}", report.workload.name);
    let _ = write!(
        s,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}}\
         table{{border-collapse:collapse;margin:8px 0 16px}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th{{background:#f3f3f3}}td:first-child{{text-align:left}}pre{{background:#f7f7f7;padding:8px;overflow:auto;max-height:400px}}\
         .note{{color:#a40}}</style></head><body>",
        esc(&title)
    );
    let _ = write!(s, "<h1>{}</h1>", esc(&title));
    let w = &report.workload;
    let _ = write!(
        s,
        "<p><b>Driver:</b> {}<br><b>Brokers:</b> {}<br><b>Workload:</b> {} topic(s) × {} partitions, {} B messages, key {:?}, {} producer(s)/topic, {} subscription(s)/topic × {} consumer(s), producerRate {} ({}), backlog {} GB, test {} s, warm-up {} s<br>\
         <b>Producer:</b> acks={} linger.ms={} batch.size={} compression={} idempotence={} max in-flight/producer={}; <b>consumers:</b> {:?}<br><b>Command:</b> <code>{}</code></p>",
        esc(&report.driver),
        esc(&report
            .brokers
            .iter()
            .map(|b| format!("{} = {}", b.label, b.address))
            .collect::<Vec<_>>()
            .join(", ")),
        w.topics,
        w.partitions_per_topic,
        w.message_size,
        w.key_distributor,
        w.producers_per_topic,
        w.subscriptions_per_topic,
        w.consumer_per_subscription,
        w.producer_rate,
        if w.producer_rate == 0.0 { "max: unthrottled, bounded in-flight" } else { "fixed, latency from intended send time" },
        w.consumer_backlog_size_gb,
        report.test_duration_secs,
        report.warmup_secs,
        esc(&report.client.acks),
        report.client.linger_ms,
        report.client.batch_size,
        esc(&report.client.compression),
        report.client.idempotence,
        report.client.max_inflight,
        report.client.consumer_mode,
        esc(&report.command_line.join(" "))
    );

    // Summary table per broker.
    let _ = write!(s, "<h2>Summary</h2>");
    let header: Vec<String> = std::iter::once("figure".to_string())
        .chain(
            report
                .aggregate
                .iter()
                .map(|a| format!("{} ({} run(s))", a.broker, a.runs)),
        )
        .chain(if report.comparison.is_some() {
            Some("B / A".to_string())
        } else {
            None
        })
        .collect();
    let per: Vec<Vec<(String, f64)>> = report
        .aggregate
        .iter()
        .map(|a| summary_figures(&a.summary))
        .collect();
    let mut rows = Vec::new();
    if let Some(first) = per.first() {
        for (i, (name, _)) in first.iter().enumerate() {
            let mut r = vec![name.clone()];
            for p in &per {
                r.push(f(p[i].1));
            }
            if let Some(c) = &report.comparison {
                r.push(c[i].ratio.map(|x| format!("{x:.3}")).unwrap_or("-".into()));
            }
            rows.push(r);
        }
    }
    let mut crow = vec!["records sent / acked / consumed (expected)".to_string()];
    for a in &report.aggregate {
        crow.push(format!(
            "{} / {} / {} ({})",
            a.counts.sent, a.counts.acked, a.counts.consumed, a.counts.expected_consumed
        ));
    }
    if report.comparison.is_some() {
        crow.push(String::new());
    }
    rows.push(crow);
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    s.push_str(&table(&rows, &hdr));

    if let Some(p) = &report.fsync_probe {
        let _ = write!(
            s,
            "<h2>Disk fdatasync (probe)</h2><p>{} sequential 4 KiB O_DIRECT writes + fdatasync in {}: fdatasync p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms ({:.0} syncs/s).</p>",
            p.writes,
            esc(&p.dir),
            f(p.fdatasync.p50_ms),
            f(p.fdatasync.p99_ms),
            f(p.fdatasync.p999_ms),
            f(p.fdatasync.max_ms),
            p.syncs_per_sec
        );
        let rows: Vec<Vec<String>> = report
            .aggregate
            .iter()
            .map(|a| {
                vec![
                    a.broker.clone(),
                    a.publish_p99_over_fsync_p99
                        .map(|x| format!("{x:.2}"))
                        .unwrap_or("-".into()),
                    a.e2e_p99_over_fsync_p99
                        .map(|x| format!("{x:.2}"))
                        .unwrap_or("-".into()),
                ]
            })
            .collect();
        s.push_str(&table(
            &rows,
            &[
                "broker",
                "publish p99 / fdatasync p99",
                "end-to-end p99 / fdatasync p99",
            ],
        ));
    }

    // Percentile plot.
    let mut series = Vec::new();
    let mut max_x: f64 = 3.0;
    for (i, m) in merged.iter().enumerate() {
        for (j, (kind, h)) in [("publish", &m.publish), ("end-to-end", &m.e2e)]
            .into_iter()
            .enumerate()
        {
            let pts = stats::percentile_curve(h);
            if let Some(&(x, _)) = pts.last() {
                max_x = max_x.max(x);
            }
            series.push(Series {
                name: format!("{} {kind}", m.label),
                color: COLORS[(i * 2 + j) % COLORS.len()],
                dashed: i > 0,
                pts,
            });
        }
    }
    let _ = write!(s, "<h2>Latency by percentile</h2>");
    s.push_str(&svg_chart(
        "Latency by percentile distribution (after warm-up)",
        "percentile",
        "latency (ms)",
        &series,
        Some(percentile_ticks(max_x)),
    ));

    // Time series.
    let mut tput = Vec::new();
    let mut lat = Vec::new();
    let mut backlog = Vec::new();
    for (i, o) in outcomes.iter().enumerate() {
        let r = &o.result;
        let name = format!("{} r{}", r.broker, r.round);
        let iv = &r.intervals;
        let c = |k: usize| COLORS[(i * 2 + k) % COLORS.len()];
        tput.push(Series {
            name: format!("{name} publish"),
            color: c(0),
            dashed: false,
            pts: iv.iter().map(|x| (x.t_s, x.rates.publish_rate)).collect(),
        });
        tput.push(Series {
            name: format!("{name} consume"),
            color: c(1),
            dashed: true,
            pts: iv.iter().map(|x| (x.t_s, x.rates.consume_rate)).collect(),
        });
        lat.push(Series {
            name: format!("{name} publish p99"),
            color: c(0),
            dashed: false,
            pts: iv
                .iter()
                .filter(|x| x.publish_p99_ms > 0.0)
                .map(|x| (x.t_s, x.publish_p99_ms))
                .collect(),
        });
        lat.push(Series {
            name: format!("{name} end-to-end p99"),
            color: c(1),
            dashed: true,
            pts: iv
                .iter()
                .filter(|x| x.e2e_p99_ms > 0.0)
                .map(|x| (x.t_s, x.e2e_p99_ms))
                .collect(),
        });
        backlog.push(Series {
            name: format!("{name} backlog"),
            color: c(0),
            dashed: false,
            pts: iv
                .iter()
                .map(|x| (x.t_s, x.backlog.max(0) as f64))
                .collect(),
        });
    }
    let _ = write!(s, "<h2>Over time</h2>");
    s.push_str(&svg_chart(
        "Throughput per interval",
        "seconds since producers started",
        "records/s",
        &tput,
        None,
    ));
    s.push_str(&svg_chart(
        "p99 latency per interval",
        "seconds since producers started",
        "ms",
        &lat,
        None,
    ));
    s.push_str(&svg_chart(
        "Backlog (acked × subscriptions − consumed)",
        "seconds since producers started",
        "records",
        &backlog,
        None,
    ));

    // Per run.
    let _ = write!(s, "<h2>Runs</h2>");
    for r in &report.runs {
        let _ = write!(
            s,
            "<h3>{} round {} ({})</h3>",
            esc(&r.broker),
            r.round,
            esc(&r.address)
        );
        let c = &r.counts;
        let _ = write!(
            s,
            "<p>sent {} acked {} publish errors {} consumed {} (expected {}) consume errors {}; measured {:.1} s: publish {:.0} msg/s ({:.2} MB/s), consume {:.0} msg/s; max backlog {}{}</p>",
            c.sent,
            c.acked,
            c.publish_errors,
            c.consumed,
            c.expected_consumed,
            c.consume_errors,
            r.summary.measured_secs,
            r.summary.rates.publish_rate,
            r.summary.rates.publish_mb_s,
            r.summary.rates.consume_rate,
            r.summary.max_backlog,
            r.summary
                .backlog_drain_secs
                .map(|d| format!("; backlog drained in {d:.1} s"))
                .unwrap_or_default()
        );
        let rows: Vec<Vec<String>> = [
            ("publish", &r.summary.publish_latency),
            ("end-to-end", &r.summary.end_to_end_latency),
        ]
        .iter()
        .map(|(n, p)| {
            std::iter::once(n.to_string())
                .chain(p.fields().iter().map(|(_, v)| f(*v)))
                .chain(std::iter::once(p.count.to_string()))
                .collect()
        })
        .collect();
        s.push_str(&table(
            &rows,
            &[
                "latency (ms)",
                "p50",
                "p75",
                "p95",
                "p99",
                "p99.9",
                "p99.99",
                "max",
                "mean",
                "count",
            ],
        ));
        for n in &r.notes {
            let _ = write!(s, "<p class=\"note\">{}</p>", esc(n));
        }
        let bs = &r.broker_stats;
        if let Some(url) = &bs.url {
            let _ = write!(
                s,
                "<details><summary>Broker stats from {}</summary>",
                esc(url)
            );
            if let Some(e) = &bs.error {
                let _ = write!(s, "<p class=\"note\">{}</p>", esc(e));
            }
            if let Some(t) = &bs.before {
                let _ = write!(s, "<p>before the run:</p><pre>{}</pre>", esc(t));
            }
            if let Some(t) = &bs.after {
                let _ = write!(s, "<p>after the run:</p><pre>{}</pre>", esc(t));
            }
            s.push_str("</details>");
        }
    }
    if !report.notes.is_empty() {
        let _ = write!(s, "<h2>Notes</h2><ul>");
        for n in &report.notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>");
    }
    s.push_str("</body></html>\n");
    s
}
