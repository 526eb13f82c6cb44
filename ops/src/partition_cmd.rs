//! `ringlog partition move`: moves a partition to another node of a cluster through any
//! node's admin HTTP listener (`POST /v1/partition-move`, `net::partition_move`).

use clap::{Args, Subcommand};

use crate::admin_client::{admin_answer, http_within, DEFAULT_ADMIN_ADDR};
use crate::output;
use crate::shards_cmd::parse_partition;

/// How long the command waits for a move (catch-up copy, handoff) to finish.
const MOVE_WAIT_MS: u64 = net::partition_move::MOVE_TIMEOUT_MS + 60_000;

#[derive(Args, Debug)]
pub struct PartitionArgs {
    #[command(subcommand)]
    command: PartitionCommand,
}

#[derive(Subcommand, Debug)]
enum PartitionCommand {
    /// Move a partition to another node (and core) of the cluster, live: the new node copies
    /// its files while it serves, then takes over; clients follow through metadata.
    Move {
        /// TOPIC/PARTITION, e.g. orders/3.
        partition: String,
        /// The node id to move it to.
        #[arg(long)]
        node: u64,
        /// The core on that node (default: its core with the fewest partitions).
        #[arg(long)]
        core: Option<u32>,
        /// Any node's admin listener (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: PartitionArgs) -> Result<(), String> {
    match args.command {
        PartitionCommand::Move {
            partition,
            node,
            core,
            admin,
            json: as_json,
        } => {
            let (topic, p) = parse_partition(&partition)?;
            let mut path = format!("/v1/partition-move?topic={topic}&partition={p}&node={node}");
            if let Some(c) = core {
                path.push_str(&format!("&core={c}"));
            }
            let (status, body) = http_within(&admin, "POST", &path, MOVE_WAIT_MS)?;
            let v = admin_answer(status, &body, "partition move")?;
            if as_json {
                output::json(&v);
            } else {
                println!(
                    "moved {topic}/{p} from node {} core {} to node {} core {} ({} bytes copied, {} ms not served)",
                    v["from_node"], v["from_core"], v["to_node"], v["to_core"], v["copied_bytes"], v["handoff_ms"]
                );
            }
            Ok(())
        }
    }
}
