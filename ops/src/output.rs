//! How admin commands print: aligned human tables by default, JSON with `--json`.

use serde_json::Value;

/// Prints rows under headers, columns padded to their widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        println!("{}", s.join("  ").trim_end());
    };
    line(headers.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

pub fn json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("a Value always serializes")
    );
}
