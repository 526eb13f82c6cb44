//! Runs one metastore node until killed.
//!
//! ```text
//! ringlog-meta-node --data-dir DIR [--node-id N] [--listen HOST:PORT]
//!                   [--peers 1=HOST:PORT,2=HOST:PORT,3=HOST:PORT] [--join HOST:PORT]
//!                   [--snapshot-every N] [--keep-logs N] [--heartbeat-ms N]
//!                   [--election-min-ms N] [--election-max-ms N]
//! ```
//! Prints `READY <listen address>` on stdout once the node runs. Raft RPC and client requests
//! (see `meta::MetaClient`) share the listen port.

use std::io::Write;

use meta::{MetaConfig, MetaError, Metastore};

fn usage(msg: &str) -> MetaError {
    MetaError::Config {
        context: format!(
            "{msg}\nusage: ringlog-meta-node --data-dir DIR [--node-id N] [--listen HOST:PORT] \
             [--peers ID=HOST:PORT,...] [--join HOST:PORT] [--snapshot-every N] [--keep-logs N] \
             [--heartbeat-ms N] [--election-min-ms N] [--election-max-ms N]"
        ),
    }
}

fn parse_args() -> Result<MetaConfig, MetaError> {
    let mut args = std::env::args().skip(1);
    let mut cfg = MetaConfig::single_node("");
    let mut data_dir = None;
    while let Some(flag) = args.next() {
        let mut val = || {
            args.next()
                .ok_or_else(|| usage(&format!("{flag} needs a value")))
        };
        let num = |v: String| -> Result<u64, MetaError> {
            v.parse()
                .map_err(|_| usage(&format!("'{v}' is not a number")))
        };
        match flag.as_str() {
            "--data-dir" => data_dir = Some(val()?),
            "--node-id" => cfg.node_id = num(val()?)?,
            "--listen" => {
                let v = val()?;
                cfg.listen = Some(
                    v.parse()
                        .map_err(|_| usage(&format!("'{v}' is not HOST:PORT")))?,
                )
            }
            "--advertise" => cfg.advertise = Some(val()?),
            "--peers" => cfg.peers = MetaConfig::parse_peers(&val()?)?,
            "--join" => cfg.join = Some(val()?),
            "--snapshot-every" => cfg.snapshot_every_logs = num(val()?)?,
            "--keep-logs" => cfg.logs_kept_after_snapshot = num(val()?)?,
            "--heartbeat-ms" => cfg.heartbeat_interval_ms = num(val()?)?,
            "--election-min-ms" => cfg.election_timeout_min_ms = num(val()?)?,
            "--election-max-ms" => cfg.election_timeout_max_ms = num(val()?)?,
            "-h" | "--help" => return Err(usage("")),
            other => return Err(usage(&format!("unknown flag {other}"))),
        }
    }
    cfg.data_dir = data_dir
        .ok_or_else(|| usage("--data-dir is required"))?
        .into();
    if cfg.listen.is_none() {
        if let Some(a) = cfg.peers.get(&cfg.node_id) {
            cfg.listen = Some(
                a.parse()
                    .map_err(|_| usage(&format!("own peer address '{a}' is not IP:PORT")))?,
            );
        }
    }
    Ok(cfg)
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let handle = match Metastore::start(cfg) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ringlog-meta-node: {e}");
            std::process::exit(1);
        }
    };
    let addr = handle
        .listen_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "-".into());
    let mut out = std::io::stdout();
    let _ = writeln!(out, "READY {addr}");
    let _ = out.flush();
    loop {
        std::thread::park();
    }
}
