//! The soak (`deploy/bench.sh soak`): the scenarios back to back for twenty minutes against one
//! broker, one booking service and one consumer, and what died, failed or was refused meanwhile.

use std::path::Path;

use serde_json::Value;

use super::read;

/// The soak's summary and its rounds, or nothing when it did not run.
pub fn section(results: &Path) -> String {
    let Some(soak) = read(&results.join("soak.json")) else {
        return String::new();
    };
    let n = |k: &str| soak[k].as_u64().unwrap_or(0);
    let mut out = String::from(
        "### The soak\n\n`deploy/bench.sh soak`: each round the whole rush (a fresh sale, its \
         invariants checked, then `sale reconcile`), the booking endpoint end to end (20,000 \
         reservations, 50 in flight) and an opening burst, back to back, against one broker \
         (Tansu on sqlite), one booking service and one consumer started once. A process that \
         died or was restarted counts once; the consumer's worker restarts (after a crash in its \
         Kafka client) count too; the broker is checked after every round by a produce and fetch \
         round trip (`deploy/stack.sh kafka`, which would restart it).\n\n\
         | figure | value |\n|---|---|\n",
    );
    out += &format!(
        "| minutes / rounds | {} / {} |\n",
        n("minutes"),
        n("rounds")
    );
    out += &format!(
        "| processes that died or were restarted | **{}** (of them the consumer's worker: {}) |\n",
        n("processes_died_or_restarted"),
        n("consumer_worker_restarts")
    );
    out += &format!(
        "| produce errors / producers replaced / times the broker was known down | {} / {} / {} |\n",
        n("produce_errors"),
        n("producers_renewed"),
        n("broker_down")
    );
    out += &format!(
        "| broker storage failures (panics in its log) | **{}** |\n",
        n("broker_storage_failures")
    );
    out += &format!(
        "| 503s answered by the booking service | {} |\n",
        n("http_503")
    );
    out += &format!(
        "| every round's invariants held and reconciled | {} |\n\n",
        if soak["invariants_held_every_round"] == true {
            "yes"
        } else {
            "**NO**"
        }
    );
    out += "| round | seconds | died or restarted | produce errors so far | 503s so far | rush failures | invariants (failed) | reconciled | reservations (answers) |\n|---|---|---|---|---|---|---|---|---|\n";
    for round in soak["rounds_detail"].as_array().into_iter().flatten() {
        out += &round_row(round);
    }
    out + "\n"
}

fn round_row(round: &Value) -> String {
    let died: Vec<&str> = round["died"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let failed: Vec<&str> = round["invariants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["ok"] != true)
        .filter_map(|c| c["name"].as_str())
        .collect();
    let answers: Vec<String> = round["reserve_statuses"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(status, count)| format!("{status}: {count}"))
        .collect();
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        round["round"],
        round["seconds"],
        if died.is_empty() {
            "none".into()
        } else {
            died.join(", ")
        },
        round["produce_errors"],
        round["http_503"],
        round["rush_failed"],
        if round["invariants"].as_array().is_none_or(Vec::is_empty) {
            "**none checked** (the rush did not finish)".to_owned()
        } else if failed.is_empty() {
            format!(
                "all {} held",
                round["invariants"].as_array().map_or(0, Vec::len)
            )
        } else {
            format!("**{}**", failed.join(", "))
        },
        if round["reconciled"] == true {
            "yes"
        } else {
            "**no**"
        },
        answers.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soak_says_what_died_and_which_invariant_failed() {
        let dir = std::env::temp_dir().join(format!("soak-md-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(section(&dir), "", "no soak, no section");
        let round = |n: u64, died: Value, ok: bool| {
            serde_json::json!({
                "round": n, "seconds": 90, "died": died, "produce_errors": 0, "http_503": 3,
                "rush_failed": 0, "reconciled": ok,
                "invariants": [{"name": "no oversell", "ok": true}, {"name": "durable", "ok": ok}],
                "reserve_statuses": {"201": 20000}
            })
        };
        let soak = serde_json::json!({
            "minutes": 21, "rounds": 2, "processes_died_or_restarted": 1,
            "consumer_worker_restarts": 0, "produce_errors": 0, "producers_renewed": 0,
            "broker_down": 0, "broker_storage_failures": 0, "http_503": 3,
            "invariants_held_every_round": false,
            "rounds_detail": [round(1, serde_json::json!([]), true),
                              round(2, serde_json::json!(["consumer"]), false)]
        });
        std::fs::write(dir.join("soak.json"), soak.to_string()).unwrap();
        let md = section(&dir);
        assert!(
            md.contains("| processes that died or were restarted | **1**"),
            "{md}"
        );
        assert!(
            md.contains("| every round's invariants held and reconciled | **NO** |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 | 90 | none | 0 | 3 | 0 | all 2 held | yes | 201: 20000 |"),
            "{md}"
        );
        assert!(
            md.contains("| 2 | 90 | consumer | 0 | 3 | 0 | **durable** | **no** |"),
            "{md}"
        );
        let unchecked = round_row(&serde_json::json!({"round": 3, "invariants": null}));
        assert!(unchecked.contains("**none checked**"), "{unchecked}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
