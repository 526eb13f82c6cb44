//! `ringlog user create|delete|list`: the SCRAM users of SASL listeners, through a node's
//! admin HTTP listener (`net::admin_http`, `/v1/scram-user`). The credential is derived here
//! (a random salt, PBKDF2 of the password); only it crosses the network. Kafka's own
//! `kafka-configs --entity-type users` works too (AlterUserScramCredentials).

use clap::{Args, Subcommand};
use meta::ScramMechanism;

use crate::admin_client::{admin_answer, http, DEFAULT_ADMIN_ADDR};
use crate::output;

/// Random salt bytes of a new credential.
const SALT_BYTES: usize = 24;
const DEFAULT_ITERATIONS: u32 = 4_096;

#[derive(Args, Debug)]
pub struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Subcommand, Debug)]
enum UserCommand {
    /// Create a user, or replace its password, for one SCRAM mechanism.
    Create {
        /// The user name (the principal is User:NAME).
        name: String,
        /// The password (only a salted PBKDF2 derivation of it is sent).
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-512 or SCRAM-SHA-256.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// PBKDF2 iterations (4096 to 16384).
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
        /// The broker's admin listener (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
    },
    /// Delete a user's credentials (one mechanism's with --mechanism).
    Delete {
        /// The user name.
        name: String,
        /// Delete only this mechanism's credential (SCRAM-SHA-512 or SCRAM-SHA-256).
        #[arg(long)]
        mechanism: Option<String>,
        /// The broker's admin listener (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
    },
    /// List the users and their mechanisms.
    List {
        /// The broker's admin listener (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn mechanism(name: &str) -> Result<ScramMechanism, String> {
    [ScramMechanism::Sha256, ScramMechanism::Sha512]
        .into_iter()
        .find(|m| m.sasl_name().eq_ignore_ascii_case(name))
        .ok_or_else(|| format!("--mechanism {name:?}: use SCRAM-SHA-512 or SCRAM-SHA-256"))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `s` with every byte outside [A-Za-z0-9._~-] as %XX.
fn escape(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"._~-".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub fn run(args: UserArgs) -> Result<(), String> {
    match args.command {
        UserCommand::Create {
            name,
            password,
            mechanism: m,
            iterations,
            admin,
        } => {
            let mech = mechanism(&m)?;
            if name.is_empty() || password.is_empty() {
                return Err("the user name and the password must not be empty".into());
            }
            let mut salt = Vec::with_capacity(SALT_BYTES);
            while salt.len() < SALT_BYTES {
                salt.extend_from_slice(&meta::state::random_u64().to_le_bytes());
            }
            salt.truncate(SALT_BYTES);
            let salted =
                net::sasl::scram::salted_password(mech, password.as_bytes(), &salt, iterations);
            let path = format!(
                "/v1/scram-user?user={}&mechanism={}&iterations={iterations}&salt={}&salted={}",
                escape(&name),
                mech.sasl_name(),
                hex(&salt),
                hex(&salted)
            );
            let (status, body) = http(&admin, "POST", &path)?;
            admin_answer(status, &body, "user create")?;
            println!("user {name}: {} credential set", mech.sasl_name());
            Ok(())
        }
        UserCommand::Delete {
            name,
            mechanism: m,
            admin,
        } => {
            let mut path = format!("/v1/scram-user?user={}", escape(&name));
            if let Some(m) = m {
                path.push_str(&format!("&mechanism={}", mechanism(&m)?.sasl_name()));
            }
            let (status, body) = http(&admin, "DELETE", &path)?;
            admin_answer(status, &body, "user delete")?;
            println!("user {name}: deleted");
            Ok(())
        }
        UserCommand::List { admin, json } => {
            let (status, body) = http(&admin, "GET", "/v1/scram-users")?;
            let v = admin_answer(status, &body, "user list")?;
            if json {
                output::json(&v);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = v
                .as_array()
                .into_iter()
                .flatten()
                .map(|u| {
                    let mechs: Vec<String> = u["credentials"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            format!(
                                "{} ({})",
                                c["mechanism"].as_str().unwrap_or("?"),
                                c["iterations"]
                            )
                        })
                        .collect();
                    vec![
                        u["user"].as_str().unwrap_or("").to_string(),
                        mechs.join(", "),
                    ]
                })
                .collect();
            output::table(&["USER", "MECHANISMS (ITERATIONS)"], &rows);
            Ok(())
        }
    }
}
