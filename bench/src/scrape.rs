//! Optional broker stats scrape: one GET through `ureq`; whatever text the endpoint returns
//! goes into the report. Absence of the endpoint is not an error of the run.

use std::time::Duration;

/// Largest body kept, in bytes.
const MAX_BODY_BYTES: u64 = 4 << 20;
/// How long a scrape may take, in milliseconds.
const SCRAPE_TIMEOUT_MS: u64 = 3_000;

pub fn get(url: &str) -> Result<String, String> {
    if !url.starts_with("http://") {
        return Err(format!("{url}: only http:// URLs are supported"));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(SCRAPE_TIMEOUT_MS)))
        .user_agent("ringlog-bench")
        .build()
        .into();
    let mut answer = agent
        .get(url)
        .header("Accept", "text/plain, */*")
        .call()
        .map_err(|e| format!("{url}: {e}"))?;
    answer
        .body_mut()
        .with_config()
        .limit(MAX_BODY_BYTES)
        .read_to_string()
        .map_err(|e| format!("{url}: {e}"))
}
