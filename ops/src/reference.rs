//! The reference pages generated from the command line's own declarations: the settings table
//! of `docs/configuration.md` (from `ringlog serve`'s flags) and `docs/cli-reference.md` (every
//! command and flag). A test keeps the files in step with the code.

use clap::{Arg, Command};

/// Where a generated part of a hand-written page starts and ends.
pub const GENERATED_BEGIN: &str =
    "<!-- generated from `ringlog serve`'s flags: edit ops/src/serve_settings.rs, not this table -->";
pub const GENERATED_END: &str = "<!-- end of generated table -->";

/// The sentence each setting's doc ends with, naming its default.
const DEFAULT_MARK: &str = "Default: ";

/// A setting's help split into its meaning and its default (`None` where it names none).
pub fn meaning_and_default(help: &str) -> (&str, Option<&str>) {
    match help.rfind(DEFAULT_MARK) {
        Some(at) => (
            help[..at].trim_end(),
            Some(help[at + DEFAULT_MARK.len()..].trim_end_matches('.')),
        ),
        None => (help, None),
    }
}

/// The literal default of a setting (`Default: \`16384\`.`), where it has one.
pub fn literal_default(help: &str) -> Option<&str> {
    let default = meaning_and_default(help).1?;
    default.strip_prefix('`')?.strip_suffix('`')
}

fn help_of(a: &Arg) -> String {
    a.get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default()
}

/// A table cell: one line, with `|` escaped.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

fn value_names(a: &Arg) -> String {
    if !a.get_action().takes_values() {
        return String::new();
    }
    a.get_value_names()
        .map(|v| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The flags of `cmd` a user sees (not `--help`, not hidden ones).
fn shown_args(cmd: &Command) -> impl Iterator<Item = &Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
}

/// The subcommands of `cmd` a user sees (not clap's own `help`, not hidden ones).
fn shown_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// The settings table: one section per concern, one row per setting (flag and file key,
/// value, default, meaning).
pub fn settings_table(serve: &Command) -> String {
    let mut out = String::new();
    let mut heading: Option<&str> = None;
    for a in shown_args(serve) {
        let Some(section) = a.get_help_heading() else {
            continue; // --config itself: not a setting.
        };
        if heading != Some(section) {
            heading = Some(section);
            out.push_str(&format!(
                "\n### {section}\n\n| flag / config key | value | default | meaning |\n|---|---|---|---|\n"
            ));
        }
        let long = a.get_long().expect("every setting has a long flag");
        let help = help_of(a);
        let (meaning, default) = meaning_and_default(&help);
        out.push_str(&format!(
            "| `--{long}` / `{long}` | {} | {} | {} |\n",
            cell(&value_names(a)),
            cell(default.unwrap_or("none")),
            cell(meaning)
        ));
    }
    out
}

/// Every command of `root`, depth first, with its path (`ringlog topic create`).
fn commands<'a>(path: String, cmd: &'a Command, out: &mut Vec<(String, &'a Command)>) {
    out.push((path.clone(), cmd));
    for sub in shown_subcommands(cmd) {
        commands(format!("{path} {}", sub.get_name()), sub, out);
    }
}

/// The whole command-line reference page.
pub fn cli_reference(root: &Command) -> String {
    let mut out = String::from(
        "# Command reference\n\n\
         Every `ringlog` command and flag, generated from the binary's own declarations \
         (`ringlog COMMAND --help` prints the same). A guide with examples is in \
         [The command line](cli.md); `ringlog serve`'s settings, also config-file keys, are in \
         [Configuration](configuration.md).\n",
    );
    let mut all = Vec::new();
    let mut root = root.clone();
    root.build();
    commands(root.get_name().to_string(), &root, &mut all);
    for (path, cmd) in all.into_iter().skip(1) {
        let depth = path.matches(' ').count();
        out.push_str(&format!("\n{} `{path}`\n\n", "#".repeat(depth.min(3) + 1)));
        if let Some(about) = cmd.get_about() {
            out.push_str(&format!("{about}\n\n"));
        }
        if cmd.has_subcommands() {
            let subs: Vec<String> = shown_subcommands(cmd)
                .map(|s| format!("`{}`", s.get_name()))
                .collect();
            out.push_str(&format!("Commands: {}.\n", subs.join(", ")));
            continue;
        }
        if cmd.get_name() == "serve" {
            out.push_str(
                "Its flags are the broker's settings: see [Configuration](configuration.md).\n",
            );
            continue;
        }
        let usage = cmd.clone().render_usage().to_string();
        let usage = usage.trim_start_matches("Usage: ");
        out.push_str(&format!("```\n{usage}\n```\n"));
        let args: Vec<&Arg> = shown_args(cmd).collect();
        if args.is_empty() {
            continue;
        }
        out.push_str("\n| argument | value | meaning |\n|---|---|---|\n");
        for a in args {
            let name = match (a.get_long(), a.get_short()) {
                (Some(l), Some(s)) => format!("`-{s}`, `--{l}`"),
                (Some(l), None) => format!("`--{l}`"),
                (None, Some(s)) => format!("`-{s}`"),
                (None, None) => format!("`{}`", value_names(a)),
            };
            let value = if a.is_positional() {
                String::new()
            } else {
                value_names(a)
            };
            let mut meaning = help_of(a);
            let defaults: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            if a.get_action().takes_values() && !defaults.is_empty() {
                meaning.push_str(&format!(" Default: `{}`.", defaults.join(",")));
            }
            out.push_str(&format!(
                "| {name} | {} | {} |\n",
                cell(&value),
                cell(&meaning)
            ));
        }
    }
    out
}

/// `page` with the part between the generated markers replaced by `table`.
pub fn with_generated_table(page: &str, table: &str) -> Option<String> {
    let begin = page.find(GENERATED_BEGIN)? + GENERATED_BEGIN.len();
    let end = page.find(GENERATED_END)?;
    (begin <= end).then(|| format!("{}\n{}\n{}", &page[..begin], table.trim(), &page[end..]))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Set `RINGLOG_WRITE_DOCS=1` to rewrite the pages instead of comparing them.
    const WRITE_DOCS_ENV: &str = "RINGLOG_WRITE_DOCS";

    fn docs_path(page: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs")
            .join(page)
    }

    fn check_page(page: &str, want: &str) {
        let path = docs_path(page);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            return;
        }
        if std::env::var_os(WRITE_DOCS_ENV).is_some() {
            std::fs::write(&path, want).unwrap();
            return;
        }
        panic!(
            "docs/{page} is not what the flags say; regenerate it with \
             `{WRITE_DOCS_ENV}=1 cargo nextest run -p ringlog-ops reference` and commit it"
        );
    }

    #[test]
    fn the_reference_pages_are_generated_from_the_flags() {
        let root = crate::Cli::command();
        let serve = root
            .find_subcommand("serve")
            .expect("ringlog serve exists")
            .clone();
        let config_page = std::fs::read_to_string(docs_path("configuration.md")).unwrap();
        let want = with_generated_table(&config_page, &settings_table(&serve))
            .expect("docs/configuration.md holds the generated-table markers");
        check_page("configuration.md", &want);
        check_page("cli-reference.md", &cli_reference(&root));
    }

    #[test]
    fn every_setting_names_its_default() {
        let root = crate::Cli::command();
        let serve = root.find_subcommand("serve").unwrap();
        for a in shown_args(serve).filter(|a| a.get_help_heading().is_some()) {
            let help = help_of(a);
            assert!(
                meaning_and_default(&help).1.is_some(),
                "--{} ends its doc with `Default: ...`",
                a.get_long().unwrap()
            );
        }
    }

    /// Every argument of every command says what it is (the reference shows no blank rows).
    #[test]
    fn every_argument_has_help() {
        let mut root = crate::Cli::command();
        root.build();
        let mut all = Vec::new();
        commands("ringlog".into(), &root, &mut all);
        let bare: Vec<String> = all
            .iter()
            .flat_map(|(path, cmd)| {
                shown_args(cmd)
                    .filter(|a| help_of(a).is_empty())
                    .map(move |a| format!("{path} {}", a.get_id()))
            })
            .collect();
        assert!(bare.is_empty(), "arguments without a doc comment: {bare:?}");
    }

    #[test]
    fn defaults_split_from_the_meaning() {
        assert_eq!(
            meaning_and_default("Pipelined requests. Default: `128`."),
            ("Pipelined requests.", Some("`128`"))
        );
        assert_eq!(literal_default("X. Default: `128`."), Some("128"));
        assert_eq!(literal_default("X. Default: the listen address."), None);
        assert_eq!(
            meaning_and_default("No default here"),
            ("No default here", None)
        );
    }
}
