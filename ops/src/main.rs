//! `ringlog`: the broker binary (`serve`) and, with later issues, the admin and debug tools.

mod serve;

use clap::{Parser, Subcommand};

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
    /// Run the broker (embedded single-node metastore).
    Serve(serve::ServeArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Serve(args) => serve::run(args),
    };
    std::process::exit(code);
}
