//! The autopilot's benchmark (`deploy/bench.sh autopilot`): the same rush through the same named
//! fault, a saturated Redis under the booking service, with the admission rate fixed and with
//! the autopilot on.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::read;

/// The side-by-side table, when both runs left their figures.
pub(super) fn section(results: &Path) -> String {
    let (Some(off), Some(on)) = (
        read(&results.join("autopilot-off.json")),
        read(&results.join("autopilot-on.json")),
    ) else {
        return String::new();
    };
    let mut out = String::from("### The autopilot under a named fault\n\n");
    out += &format!(
        "The same rush twice: {} people, who think about {} ms between admission and booking, \
         for 3,000 seats, with the booking service's Redis saturated (`floodgate-loadgen fault`: \
         at most {} replies a second, the queue growing past that). Once at a fixed admission \
         rate of 300 a second (the autopilot off), once with the autopilot between 20 and 300 \
         (settle 3 s, default targets).\n\n",
        off["clients"], off["think_ms"], off["fault_replies_per_sec"]
    );
    out += "| | autopilot off | autopilot on |\n|---|---|---|\n";
    let row = |name: &str, f: &dyn Fn(&Value) -> String| {
        format!("| {name} | {} | {} |\n", f(&off), f(&on))
    };
    out += &row("503s answered by the booking service", &|r| {
        format!("**{}**", r["booking_503"])
    });
    out += &row("people whose run failed", &|r| {
        r["outcomes"]["failed"].to_string()
    });
    out += &row("seats held and paid", &|r| {
        r["outcomes"]["paid"].to_string()
    });
    out += &row("time until the last seat was held", &|r| {
        let last = r["seconds_until_last_hold"]
            .as_f64()
            .map_or("-".into(), |secs| format!("{secs:.1} s"));
        // Sold out: someone was told so, or found nothing left once admitted.
        let told = r["outcomes"]["sold_out_while_waiting"]
            .as_u64()
            .unwrap_or(0)
            + r["outcomes"]["nothing_left_when_admitted"]
                .as_u64()
                .unwrap_or(0);
        if told > 0 {
            format!("**{last}** (sold out)")
        } else {
            format!("{last} (**never sold out**)")
        }
    });
    out += &row("reserve p50 / p99 / max (retries included)", &|r| {
        crate::report::Latencies::describe(&r["reserve_ms"])
    });
    out += &row("admission rate over the rush: min / median / max", &rates);
    out += &row(
        "the autopilot's steps: cut / raised / held (by why)",
        &steps,
    );
    out += &row("the sale's invariants", &|r| {
        let all = r["checks"]
            .as_array()
            .is_some_and(|c| c.iter().all(|c| c["ok"] == Value::Bool(true)));
        if all { "all hold" } else { "NOT ALL HOLD" }.into()
    });
    out +=
        "\n(The steps are the figures read once a second, so a step between two readings is not \
            counted.)\n\n";
    out
}

/// The admission rate's spread over the run.
fn rates(run: &Value) -> String {
    let mut rates: Vec<f64> = series(run)
        .filter_map(|s| s["admission_rate"].as_f64())
        .collect();
    rates.sort_by(f64::total_cmp);
    match (rates.first(), rates.get(rates.len() / 2), rates.last()) {
        (Some(min), Some(mid), Some(max)) => format!("{min:.0} / {mid:.0} / {max:.0} a second"),
        _ => "-".into(),
    }
}

/// The autopilot's steps as read: cuts by signal, raises, holds by why.
fn steps(run: &Value) -> String {
    let (mut cut, mut raised, mut held) = (BTreeMap::new(), 0, BTreeMap::new());
    for d in series(run).map(|s| &s["decision"]) {
        let name = |key: &str| d[key].as_str().unwrap_or("?").to_owned();
        match d["action"].as_str() {
            Some("cut") => *cut.entry(name("signal")).or_insert(0u32) += 1,
            Some("raised") => raised += 1,
            Some("held") => *held.entry(name("why")).or_insert(0u32) += 1,
            _ => {}
        }
    }
    if cut.is_empty() && raised == 0 && held.is_empty() {
        return "-".into();
    }
    let list = |m: &BTreeMap<String, u32>| {
        m.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{} ({}) / {raised} / {} ({})",
        cut.values().sum::<u32>(),
        list(&cut),
        held.values().sum::<u32>(),
        list(&held)
    )
}

/// The figures read once a second during the run.
fn series(run: &Value) -> impl Iterator<Item = &Value> {
    run["every_second"].as_array().into_iter().flatten()
}
