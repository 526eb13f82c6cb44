//! Optional broker stats scrape: a plain HTTP/1.0 GET (no client library), whatever text the
//! endpoint returns goes into the report. Absence of the endpoint is not an error of the run.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest body kept.
const MAX_BODY: usize = 4 << 20;

pub fn get(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = hostport
        .to_socket_addrs()
        .map_err(|e| format!("{url}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url}: no address"))?;
    let timeout = Duration::from_secs(3);
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{url}: {e}"))?;
    s.set_read_timeout(Some(timeout)).ok();
    s.set_write_timeout(Some(timeout)).ok();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {hostport}\r\nUser-Agent: ringlog-bench\r\nAccept: text/plain, */*\r\n\r\n"
    )
    .map_err(|e| format!("{url}: {e}"))?;
    let mut buf = Vec::new();
    s.take(MAX_BODY as u64)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{url}: {e}"))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{url}: not an HTTP response"))?;
    let status = head.lines().next().unwrap_or("");
    if !status
        .split_whitespace()
        .nth(1)
        .is_some_and(|c| c.starts_with('2'))
    {
        return Err(format!("{url}: {status}"));
    }
    Ok(body.to_string())
}
