//! The comparisons with what Floodgate replaces: the naive PostgreSQL counter row (its speed,
//! and the oversell of its race) and Node's `ws` holding the same idle connections.

use std::path::Path;

use serde_json::Value;

use super::read;

/// Both comparisons' tables, each only when its run left its figures.
pub(super) fn section(results: &Path) -> String {
    let mut out = String::new();
    let locked = read(&results.join("naive-for-update.json"));
    let race = read(&results.join("naive-race.json"));
    let ours = read(&results.join("naive-floodgate.json"));
    if locked.is_some() || race.is_some() || ours.is_some() {
        out += "### Against the naive PostgreSQL counter\n\n";
        out += "20,000 attempts at 1,000 seats, 50 at once.\n\n";
        out += "| approach | attempts per second | sold | oversold |\n|---|---|---|---|\n";
        for (name, run) in [
            ("one counter row, `SELECT ... FOR UPDATE`", &locked),
            ("one counter row, read then write back (the race)", &race),
        ] {
            if let Some(r) = run {
                out += &format!(
                    "| {name} | {:.0} | {} | **{}** |\n",
                    r["attempts_per_second"].as_f64().unwrap_or(0.0),
                    r["booked"],
                    r["oversold"]
                );
            }
        }
        if let Some(r) = &ours {
            let sold = r["statuses"]["201"].as_i64().unwrap_or(0);
            let attempts = r["requests"].as_f64().unwrap_or(0.0);
            out += &format!(
                "| Floodgate's booking endpoint (pool script, broker ack, 201) | {:.0} | {sold} | **{}** |\n",
                attempts / r["seconds"].as_f64().unwrap_or(1.0).max(1e-9),
                (sold - 1000).max(0)
            );
        }
        out += "\n";
    }

    let ours = read(&results.join("peer-floodgate.json"));
    let node = read(&results.join("peer-node.json"));
    if let (Some(ours), Some(node)) = (&ours, &node) {
        let bytes = |r: &Value| r["bytes_per_connection"].as_f64().unwrap_or(0.0);
        out += "### Idle connections against Node's `ws`\n\n";
        out += "The same load generator opens the same number of idle sessions on each; each \
                server sends every client one small JSON message and holds the connection.\n\n";
        out += "| server | connections | RSS before / with them | per connection |\n|---|---|---|---|\n";
        for (name, r) in [("Floodgate's gateway", ours), ("Node.js `ws` 8", node)] {
            out += &format!(
                "| {name} | {} | {} / {} KiB | **{:.2} KB** |\n",
                r["connections"],
                r["rss_kib_before"],
                r["rss_kib_after"],
                bytes(r) / 1000.0
            );
        }
        out += &format!(
            "\nFloodgate's gateway holds an idle connection in **{:.0} %** of the memory Node's `ws` \
             needs (target: at most half).\n\n",
            100.0 * bytes(ours) / bytes(node).max(1e-9)
        );
    }
    out
}
