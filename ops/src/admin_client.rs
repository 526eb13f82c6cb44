//! The CLI's side of the broker's admin HTTP listener (`serve --metrics-listen`): requests
//! through `ureq`, JSON answers through `serde_json`, and the `/metrics` page read by the
//! strict OpenMetrics parser (`openmetrics-parser`), never by string matching.

use std::collections::BTreeMap;
use std::time::Duration;

use openmetrics_parser::{MetricNumber, OpenMetricsValue};

/// Redpanda's admin port, the default of `--admin`.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9644";
/// How long an admin request may take when the caller names no other limit.
pub const HTTP_TIMEOUT_MS: u64 = 30_000;
/// Largest admin answer read (a `/metrics` page of many partitions is the big one).
pub const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// Sends one request (no body) and returns (status, body).
pub fn http(addr: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    http_within(addr, method, path, HTTP_TIMEOUT_MS)
}

/// [`http`], waiting at most `timeout_ms` for the whole answer.
pub fn http_within(
    addr: &str,
    method: &str,
    path: &str,
    timeout_ms: u64,
) -> Result<(u16, String), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_millis(timeout_ms)))
        .build()
        .into();
    let url = format!("http://{addr}{path}");
    let answer = match method {
        "GET" => agent.get(&url).call(),
        "POST" => agent.post(&url).send_empty(),
        "DELETE" => agent.delete(&url).call(),
        other => return Err(format!("no admin request uses the method {other}")),
    };
    let mut answer = answer.map_err(|e| match e {
        ureq::Error::Timeout(_) => {
            format!("the admin listener at {addr} did not answer {method} {path} within {timeout_ms} ms")
        }
        e => format!(
            "cannot reach the admin listener at {addr}: {e} (start the broker with --metrics-listen {addr}, or pass --admin HOST:PORT)"
        ),
    })?;
    let status = answer.status().as_u16();
    let body = answer
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_string()
        .map_err(|e| format!("reading the answer of {method} {path} from {addr}: {e}"))?;
    Ok((status, body))
}

/// An admin listener's JSON answer; a status other than 200 is an error naming `what` and
/// the listener's reason.
pub fn admin_answer(status: u16, body: &str, what: &str) -> Result<serde_json::Value, String> {
    let v: serde_json::Value = serde_json::from_str(body.trim())
        .map_err(|_| format!("admin answered {status}: {body}"))?;
    if status != 200 {
        return Err(format!(
            "{what} refused: {}",
            v["error"].as_str().unwrap_or(body.trim())
        ));
    }
    Ok(v)
}

/// Counter and gauge samples of a `/metrics` page: (sample name, labels) → value. A
/// counter's sample name is its family's with `_total`, as on the page.
pub type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// Reads a `/metrics` page (OpenMetrics text) with the strict parser; an invalid page is an
/// error naming what is wrong.
pub fn parse_metrics(text: &str) -> Result<Samples, String> {
    let page = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .map_err(|e| format!("the /metrics page is not valid OpenMetrics text: {e:?}"))?;
    let mut out = Samples::new();
    for (name, family) in &page.families {
        let names = family.get_label_names().to_vec();
        for sample in family.iter_samples() {
            let (sample_name, value) = match &sample.value {
                OpenMetricsValue::Counter(c) => (format!("{name}_total"), number(&c.value)),
                OpenMetricsValue::Gauge(g) | OpenMetricsValue::Unknown(g) => {
                    (name.clone(), number(g))
                }
                _ => continue,
            };
            let labels = sample
                .get_labelset()
                .map_err(|e| format!("{name}: {e:?}"))?
                .iter()
                .filter(|(k, _)| names.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            out.insert((sample_name, labels), value);
        }
    }
    Ok(out)
}

fn number(n: &MetricNumber) -> f64 {
    n.as_f64()
}
