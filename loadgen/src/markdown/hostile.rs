//! The hostile rush (`deploy/bench.sh hostile`): the same sale three times calm and three times
//! with strangers attacking at fixed rates beside the crowd, the services at their default
//! per-address allowances. What the honest people saw, the median of each three with its range,
//! and what the strangers' requests cost the services.

use std::path::Path;

use serde_json::Value;

use super::cpu::Phase;
use super::read;

/// The rounds a run pairs (calm and hostile each).
const ROUNDS: [u32; 3] = [1, 2, 3];

/// The section, when every run of the six left its figures.
pub(super) fn section(results: &Path) -> String {
    let runs = |mode: &str| -> Option<Vec<Value>> {
        ROUNDS
            .iter()
            .map(|round| read(&results.join(format!("hostile-{mode}-{round}.json"))))
            .collect()
    };
    let (Some(calm), Some(hostile)) = (runs("calm"), runs("hostile")) else {
        return String::new();
    };
    let strangers = &hostile[0]["strangers"];
    let mut out = String::from("### A rush that is half hostile\n\n");
    out += &format!(
        "The same sale, {} people who think about {} ms between admission and booking, for 3,000 \
         seats, with the autopilot on (between 20 and 300 a second), run three times calm and \
         three times with a stranger beside the crowd: from {} addresses of its own, each attack \
         at {} requests a second for the whole rush (`floodgate-loadgen hostile`), after it \
         waited in line like anyone and bought one seat (whose request it replays). The \
         services run at their default per-address allowances; the crowd comes from 1,500 \
         addresses. Median of the three runs, the range in brackets.\n\n",
        calm[0]["clients"],
        calm[0]["think_ms"],
        strangers["addresses"],
        strangers["per_attack_per_sec"]
    );
    out += "| what the honest people saw | calm | hostile |\n|---|---|---|\n";
    let row = |name: &str, f: &dyn Fn(&Value) -> Option<f64>, unit: &str| {
        format!(
            "| {name} | {} | {} |\n",
            spread(&calm, f, unit),
            spread(&hostile, f, unit)
        )
    };
    out += &row("503s answered to them", &|r| Some(honest_503(r)), "");
    out += &row(
        "people who paid for a seat",
        &|r| r["outcomes"]["paid"].as_f64(),
        "",
    );
    out += &row(
        "people whose run failed",
        &|r| r["outcomes"]["failed"].as_f64(),
        "",
    );
    out += &row(
        "join to admission p50",
        &|r| r["join_to_admission_ms"]["p50"].as_f64(),
        " ms",
    );
    out += &row(
        "join to admission p99",
        &|r| r["join_to_admission_ms"]["p99"].as_f64(),
        " ms",
    );
    out += &row(
        "time until the last seat was held",
        &|r| r["seconds_until_last_hold"].as_f64(),
        " s",
    );
    out += &row("the autopilot's cut steps", &|r| Some(cuts(r) as f64), "");
    let all_hold = |runs: &[Value]| {
        runs.iter().all(|r| {
            r["checks"]
                .as_array()
                .is_some_and(|c| c.iter().all(|c| c["ok"] == Value::Bool(true)))
        })
    };
    out += &format!(
        "| the sale's invariants, every run | {} | {} |\n\n",
        verdict(all_hold(&calm)),
        verdict(all_hold(&hostile))
    );
    out + &strangers_cost(results, &hostile)
}

/// What the stranger sent and was answered, and what its requests cost the services.
fn strangers_cost(results: &Path, hostile: &[Value]) -> String {
    let mut out = String::from(
        "| attack (the stranger's) | sent a second | answered (median run) |\n|---|---|---|\n",
    );
    let middle = &hostile[1]["strangers"]["attacks"];
    for (name, attack) in middle.as_object().into_iter().flatten() {
        let answers = attack["answers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(status, n)| format!("{status}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        out += &format!(
            "| {name} | {:.0} | {answers} |\n",
            attack["per_sec"].as_f64().unwrap_or(0.0)
        );
    }
    // Each round's hostile run less its calm pair, per role and in all, over what was sent.
    let pairs: Vec<(Phase, Phase, f64)> = ROUNDS
        .iter()
        .zip(hostile)
        .filter_map(|(round, run)| {
            let calm = Phase::read(results, &format!("hostile-calm-{round}"))?;
            let loud = Phase::read(results, &format!("hostile-hostile-{round}"))?;
            let sent = sent(run);
            (sent > 0.0).then_some((calm, loud, sent))
        })
        .collect();
    let per_request = |cpu: &dyn Fn(&Phase) -> f64| -> String {
        let values = pairs
            .iter()
            .map(|(calm, loud, sent)| (cpu(loud) - cpu(calm)) * 1e6 / sent)
            .collect();
        spread_of(values, " us")
    };
    out += "\n| the services' CPU per hostile request | median [range] |\n|---|---|\n";
    let roles: std::collections::BTreeSet<&String> = pairs
        .iter()
        .flat_map(|(_, loud, _)| loud.roles.keys())
        .collect();
    for role in roles {
        out += &format!("| {role} | {} |\n", per_request(&|p| p.cpu(role)));
    }
    out += &format!(
        "| **all of them** | {} |\n\nEach is a process's CPU in a hostile run less its calm \
         pair's, over the requests the stranger sent. On this machine the stranger, the crowd \
         and every service share two cores, so part of any difference is the stranger's own \
         CPU taken from the services, not work it made them do.\n\n",
        per_request(&|p| p.roles.keys().map(|r| p.cpu(r)).sum::<f64>())
    );
    out
}

/// The booking service's 503s less those the stranger was answered: the honest people's.
fn honest_503(run: &Value) -> f64 {
    let all = run["booking_503"].as_f64().unwrap_or(0.0);
    let theirs: f64 = ["replay", "zero", "webhook"]
        .iter()
        .filter_map(|a| run["strangers"]["attacks"][a]["answers"]["503"].as_f64())
        .sum();
    (all - theirs).max(0.0)
}

/// The stranger's requests over the run.
fn sent(run: &Value) -> f64 {
    run["strangers"]["attacks"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, a)| a["sent"].as_f64())
        .sum()
}

/// The autopilot's cut steps, each counted once (by its time) however often it was read.
fn cuts(run: &Value) -> usize {
    let mut at: Vec<i64> = run["every_second"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["decision"]["action"] == "cut")
        .filter_map(|s| s["step_at"].as_i64())
        .collect();
    at.dedup();
    at.len()
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "all hold"
    } else {
        "NOT ALL HOLD"
    }
}

/// `f` of each run: the median, and the range.
fn spread(runs: &[Value], f: &dyn Fn(&Value) -> Option<f64>, unit: &str) -> String {
    spread_of(runs.iter().filter_map(f).collect(), unit)
}

fn spread_of(mut values: Vec<f64>, unit: &str) -> String {
    values.sort_by(f64::total_cmp);
    match (values.first(), values.get(values.len() / 2), values.last()) {
        (Some(min), Some(mid), Some(max)) => {
            format!("**{}{unit}** [{} to {}]", fmt(*mid), fmt(*min), fmt(*max))
        }
        _ => "-".into(),
    }
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_honest_503s_are_the_services_less_the_strangers() {
        let run = json!({
            "booking_503": 12,
            "strangers": {"attacks": {
                "replay": {"answers": {"503": 5, "201": 3}},
                "zero": {"answers": {"429": 9}},
                "webhook": {"answers": {"503": 2}},
                "place": {"answers": {"503": 100}},
            }},
        });
        // The gateway's place_busy is not the booking service's: not subtracted.
        assert_eq!(honest_503(&run), 5.0);
        assert_eq!(honest_503(&json!({"booking_503": 4})), 4.0);
    }

    #[test]
    fn each_process_is_charged_its_own_extra_cpu_per_hostile_request() {
        let dir = std::env::temp_dir().join(format!("fg-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let phase = |name: &str, gateway: f64, redis: f64| {
            let v = json!({"phase": name, "seconds": 20.0, "counts": {"people": 6000},
                "processes": [
                    {"name": "gateway-1", "role": "gateway", "user_s": gateway, "system_s": 0.0},
                    {"name": "redis", "role": "redis", "user_s": redis, "system_s": 0.0}]});
            std::fs::write(dir.join(format!("cpu-{name}.json")), v.to_string()).unwrap();
        };
        phase("hostile-calm-1", 10.0, 4.0);
        phase("hostile-hostile-1", 11.0, 4.5);
        let run = json!({"strangers": {"attacks": {
            "replay": {"sent": 6000, "per_sec": 100.0, "answers": {"429": 6000}},
            "place": {"sent": 4000, "per_sec": 100.0, "answers": {"200": 4000}}}}});
        let table = strangers_cost(&dir, &[run.clone(), run.clone(), run]);
        std::fs::remove_dir_all(&dir).unwrap();
        // 1 s of the gateway's and 0.5 s of Redis' over 10,000 requests.
        assert!(
            table.contains("| gateway | **100 us** [100 to 100] |"),
            "{table}"
        );
        assert!(
            table.contains("| redis | **50 us** [50 to 50] |"),
            "{table}"
        );
        assert!(table.contains("| **all of them** | **150 us**"), "{table}");
        assert!(table.contains("| replay | 100 | 429: 6000 |"), "{table}");
    }

    #[test]
    fn a_cut_read_several_times_is_one_step() {
        let run = json!({"every_second": [
            {"step_at": 1, "decision": {"action": "cut"}},
            {"step_at": 1, "decision": {"action": "cut"}},
            {"step_at": 2, "decision": {"action": "held"}},
            {"step_at": 3, "decision": {"action": "cut"}},
        ]});
        assert_eq!(cuts(&run), 2);
    }

    #[test]
    fn the_spread_is_the_median_and_the_range() {
        assert_eq!(spread_of(vec![3.0, 1.0, 2.5], " s"), "**2.5 s** [1 to 3]");
        assert_eq!(spread_of(vec![], ""), "-");
    }
}
