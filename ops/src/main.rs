//! `ringlog`: the broker binary (`serve`) and, with later issues, the admin and debug tools.

mod admin_client;
mod barrier_cmd;
mod client;
mod cluster_cmd;
mod data_cmd;
mod dump_segment;
mod fanout_cmd;
mod group_cmd;
mod output;
mod partition_cmd;
mod partition_offsets;
mod proxy;
/// The generated reference pages: built and checked by the tests only.
#[cfg(test)]
mod reference;
mod serve;
mod serve_settings;
mod shards_cmd;
mod topic_cmd;
mod user_cmd;

use clap::{Parser, Subcommand};

/// Oversized up-front reservations (a request's lying array count) cost address space, not
/// memory: see `net::lazy_reserve`.
#[global_allocator]
static ALLOCATOR: net::lazy_reserve::LazyReserve = net::lazy_reserve::LazyReserve;

#[derive(Parser)]
#[command(
    name = "ringlog",
    version,
    about = "ringlog: a Kafka-compatible, thread-per-core log broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (embedded single-node metastore; a cluster node with --peers).
    Serve(Box<serve::ServeArgs>),
    /// Consumer groups: list, describe, reset offsets.
    Group(group_cmd::GroupArgs),
    /// Topics: create, list, describe, alter-config, add-partitions, delete.
    Topic(topic_cmd::TopicArgs),
    /// Produce lines from stdin to a topic (like `kcat -P`).
    Produce(data_cmd::ProduceArgs),
    /// Print messages of a topic (like `kcat -C`).
    Consume(data_cmd::ConsumeArgs),
    /// Cluster id, controller, brokers and supported API versions.
    Cluster(cluster_cmd::ClusterArgs),
    /// A TCP proxy that logs every Kafka request and response passing through.
    Proxy(proxy::ProxyArgs),
    /// Decode a segment's .log, .index or .timeindex file and find where it is damaged.
    DumpSegment(dump_segment::DumpArgs),
    /// Fan-out children: attach, detach, list.
    Fanout(fanout_cmd::FanoutArgs),
    /// Per-core view: partitions, rates, exact latency p99s, queues, busy fraction, hottest
    /// partitions; live with --watch, the busiest partitions with --hot N.
    Shards(shards_cmd::ShardsArgs),
    /// Per-core tuning: move a partition to another core.
    Shard(shards_cmd::ShardArgs),
    /// Cluster placement: move a partition to another node.
    Partition(partition_cmd::PartitionArgs),
    /// SCRAM users of SASL listeners: create, delete, list.
    User(user_cmd::UserArgs),
    /// Barrier cuts: define, delete, describe, trigger, list, verify.
    Barrier(barrier_cmd::BarrierArgs),
}

/// Prints a command's error and turns it into the exit status.
fn report(r: Result<(), String>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ringlog: {e}");
            1
        }
    }
}

fn main() {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        // Admin commands behave like other CLI tools in a pipe (`| head`): die quietly on a
        // closed stdout instead of panicking.
        // SAFETY: restoring the default disposition of one signal before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let code = match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Group(args) => report(group_cmd::run(args)),
        Command::Topic(args) => report(topic_cmd::run(args)),
        Command::Produce(args) => report(data_cmd::produce(args)),
        Command::Consume(args) => report(data_cmd::consume(args)),
        Command::Cluster(args) => report(cluster_cmd::run(args)),
        Command::Proxy(args) => report(proxy::run(args)),
        Command::DumpSegment(args) => report(dump_segment::run(args)),
        Command::Shards(args) => report(shards_cmd::run_shards(args)),
        Command::Fanout(args) => report(fanout_cmd::run(args)),
        Command::Shard(args) => report(shards_cmd::run_shard(args)),
        Command::Partition(args) => report(partition_cmd::run(args)),
        Command::User(args) => report(user_cmd::run(args)),
        Command::Barrier(args) => barrier_cmd::run(args),
    };
    std::process::exit(code);
}
