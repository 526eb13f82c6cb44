//! How admin commands print: aligned human tables by default, JSON with `--json`.

use serde_json::Value;

/// Prints rows under headers, columns padded to their widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    print!("{}", table_text(headers, rows));
}

/// [`table`]'s text, for a caller that composes a whole screen (`shards --watch`).
pub fn table_text(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let mut line = |cells: Vec<&str>| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(s.join("  ").trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

pub fn json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("a Value always serializes")
    );
}
