//! `ringlog`: the broker binary (`serve`) and, with later issues, the admin and debug tools.

mod client;
mod group_cmd;
mod output;
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
    /// Consumer groups: list, describe, reset offsets.
    Group(group_cmd::GroupArgs),
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
        Command::Serve(args) => serve::run(args),
        Command::Group(args) => report(group_cmd::run(args)),
    };
    std::process::exit(code);
}
