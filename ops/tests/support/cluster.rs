//! A cluster of `ringlog serve` nodes on 127.0.0.1 for the multi-node tests (issues #17,
//! #18): started together over `--peers`, short broker sessions, a rack and the shared
//! cluster secret each; Metadata helpers.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::Duration;

use kafka_protocol::messages::{MetadataRequest, MetadataResponse};

use super::wire::call;
use super::*;

pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const LEADER_NOT_AVAILABLE: i16 = 5;
pub const METADATA_KEY: i16 = 3;
/// Short sessions, so that a killed node is fenced within seconds.
pub const SESSION_TIMEOUT_MS: &str = "3000";
pub const HEARTBEAT_INTERVAL_MS: &str = "500";

/// How often a cluster is started on newly drawn ports when one was taken meanwhile, or a
/// node stalled past its ready timeout.
const CLUSTER_START_ATTEMPTS: usize = 3;
/// What a node prints when its port was taken (the OS's EADDRINUSE).
const PORT_TAKEN: &str = "Address already in use";

/// `nodes` brokers of `cores` cores each, started together as one cluster (node ids 1..).
pub fn cluster(nodes: u64, cores: usize) -> Vec<Broker> {
    cluster_with_peers(nodes, cores).0
}

/// [`cluster`], and its `--peers` (node id -> metastore address).
pub fn cluster_with_peers(nodes: u64, cores: usize) -> (Vec<Broker>, BTreeMap<u64, String>) {
    cluster_with_args(nodes, cores, |_| Vec::new())
}

/// [`cluster_with_peers`] with more serve flags for node `i` (`extra(i)`).
pub fn cluster_with_args(
    nodes: u64,
    cores: usize,
    extra: impl Fn(u64) -> Vec<String>,
) -> (Vec<Broker>, BTreeMap<u64, String>) {
    let mut last_err = String::new();
    for _ in 0..CLUSTER_START_ATTEMPTS {
        let peers: BTreeMap<u64, String> = (1..=nodes)
            .map(|i| (i, format!("127.0.0.1:{}", free_port())))
            .collect();
        let list = peers_arg(&peers);
        let args: Vec<Vec<String>> = (1..=nodes)
            .map(|i| {
                let mut a = node_args(i, &list, None);
                a.extend(extra(i));
                a
            })
            .collect();
        match Broker::try_start_together(cores, &args) {
            Ok(brokers) => return (brokers, peers),
            // Another test bound a port drawn for this cluster between the draw and the
            // bind, or a node did not come up within its ready timeout on a loaded machine:
            // the cluster starts again, on new ports (said on stderr, so a stall shows).
            Err(e) if e.contains(PORT_TAKEN) || e.contains(READY_STALLED) => {
                eprintln!("cluster start failed, starting again on new ports: {e}");
                last_err = e;
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("a cluster did not start in {CLUSTER_START_ATTEMPTS} attempts: {last_err}");
}

pub fn peers_arg(peers: &BTreeMap<u64, String>) -> String {
    peers
        .iter()
        .map(|(i, a)| format!("{i}={a}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The serve flags of node `i` (short sessions, a rack each), joining through `join`.
pub fn node_args(i: u64, peers: &str, join: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = [
        "--node-id",
        &i.to_string(),
        "--peers",
        peers,
        "--broker-session-timeout-ms",
        SESSION_TIMEOUT_MS,
        "--broker-heartbeat-interval-ms",
        HEARTBEAT_INTERVAL_MS,
        "--rack",
        &format!("rack-{i}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The nodes authenticate their calls to each other (the same secret on every node).
    args.extend(["--cluster-secret-file".to_string(), cluster_secret_file()]);
    if let Some(j) = join {
        args.extend(["--join".to_string(), j.to_string()]);
    }
    args
}

/// A cluster secret file shared by this test process's nodes.
pub fn cluster_secret_file() -> String {
    let path = std::env::temp_dir().join(format!("ringlog-test-secret-{}", std::process::id()));
    if !path.exists() {
        std::fs::write(&path, "test-cluster-secret-0123456789abcdef0123456789\n").unwrap();
    }
    path.display().to_string()
}

/// Every node's address, as a client's bootstrap list.
pub fn bootstrap(nodes: &[Broker]) -> String {
    nodes
        .iter()
        .map(Broker::bootstrap)
        .collect::<Vec<_>>()
        .join(",")
}

pub fn metadata(node: &Broker, topic: &str) -> MetadataResponse {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(
            kafka_protocol::protocol::StrBytes::from_string(topic.into()),
        )))]));
    call_node(node, METADATA_KEY, 12, &req)
}

/// One request `req` (API `api_key`, `version`) to `node` on a connection of its own, and its
/// decoded response (30 s at most).
pub fn call_node<Req, Resp>(node: &Broker, api_key: i16, version: i16, req: &Req) -> Resp
where
    Req: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion,
    Resp: kafka_protocol::protocol::Decodable + kafka_protocol::protocol::HeaderVersion,
{
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    call(&mut s, api_key, version, 1, req)
}

/// Partition -> leader broker id of `topic`, as `node` answers.
pub fn leaders(node: &Broker, topic: &str) -> BTreeMap<i32, i32> {
    let m = metadata(node, topic);
    m.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect()
}
