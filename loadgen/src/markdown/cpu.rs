//! Every process's CPU over the timed phases of one run (`cpu-<phase>.json`, written by
//! `deploy/bench.sh`'s `cpu_begin`/`cpu_end`), and the headline figures derived from them: CPU
//! per message, per reservation, per event, each beside its target. Wall-clock figures move with
//! whatever else shares the two cores; a process's CPU per unit of work does much less.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::read;

/// One phase: its wall time, counts, and each role's CPU (its processes summed).
pub struct Phase {
    pub name: String,
    pub seconds: f64,
    pub counts: Value,
    /// The count its table divides by (the first one `cpu_end` was given).
    pub unit: Option<String>,
    /// role → (processes, user seconds, system seconds)
    pub roles: BTreeMap<String, (usize, f64, f64)>,
}

impl Phase {
    pub fn read(results: &Path, name: &str) -> Option<Self> {
        Self::from_json(&read(&results.join(format!("cpu-{name}.json")))?)
    }

    fn from_json(v: &Value) -> Option<Self> {
        let mut roles: BTreeMap<String, (usize, f64, f64)> = BTreeMap::new();
        for p in v["processes"].as_array()? {
            let entry = roles.entry(p["role"].as_str()?.to_owned()).or_default();
            entry.0 += 1;
            entry.1 += p["user_s"].as_f64().unwrap_or(0.0);
            entry.2 += p["system_s"].as_f64().unwrap_or(0.0);
        }
        Some(Self {
            name: v["phase"].as_str()?.to_owned(),
            seconds: v["seconds"].as_f64().unwrap_or(0.0),
            counts: v["counts"].clone(),
            unit: v["unit"].as_str().map(str::to_owned),
            roles,
        })
    }

    /// A role's CPU seconds (user plus system); 0 if it took no part.
    pub fn cpu(&self, role: &str) -> f64 {
        self.roles.get(role).map_or(0.0, |(_, u, s)| u + s)
    }

    pub fn count(&self, key: &str) -> f64 {
        self.counts[key].as_f64().unwrap_or(0.0)
    }

    /// Microseconds of `role`'s CPU per one of `count`; `None` without any.
    pub fn per(&self, role: &str, count: &str) -> Option<f64> {
        let n = self.count(count);
        (n > 0.0 && self.roles.contains_key(role)).then(|| self.cpu(role) * 1e6 / n)
    }
}

/// Every phase of the run, in the order they ran.
pub fn phases(results: &Path) -> Vec<Phase> {
    let mut found: Vec<(std::time::SystemTime, Phase)> = std::fs::read_dir(results)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("cpu-") && name.ends_with(".json")
        })
        .filter_map(|e| {
            let when = e.metadata().ok()?.modified().ok()?;
            Some((when, Phase::from_json(&read(&e.path())?)?))
        })
        .collect();
    found.sort_by_key(|(when, _)| *when);
    found.into_iter().map(|(_, p)| p).collect()
}

fn us(v: Option<f64>) -> String {
    v.map_or("not measured".into(), |v| format!("**{v:.1} us**"))
}

/// One headline row: figure, measured, target, and whether it is met (when there is a target).
struct Row(String, String, String, Option<bool>);

/// The headline figures: the per-process CPU ratios, each beside its target.
pub fn headline(results: &Path, cores: f64) -> String {
    let mut rows = fan_out_rows(results, cores);
    for setup in [
        Setup::single(50),
        Setup::single(400),
        Setup::cluster(0),
        Setup::cluster(1),
    ] {
        rows.extend(booking_rows(results, &setup));
    }
    if let (Some(p), Some(alone)) = (
        Phase::read(results, "raw-producer-50"),
        read(&results.join("raw-producer-50.json")),
    ) {
        let events = alone["events"].as_f64().unwrap_or(0.0);
        let cpu = &alone["loadgen_cpu"];
        let own = cpu["user_s"].as_f64().unwrap_or(0.0) + cpu["system_s"].as_f64().unwrap_or(0.0);
        rows.push(Row(
            "the producer alone, Floodgate's settings, 50 events in flight on one pool: its process's CPU per acknowledged event (the broker's beside it)".into(),
            format!(
                "{} ({})",
                us((events > 0.0).then(|| own * 1e6 / events)),
                p.per("broker", "events").map_or("?".into(), |v| format!("{v:.1} us"))
            ),
            String::new(),
            None,
        ));
    }
    if let Some(b) = Phase::read(results, "burst") {
        let join = b.per("gateway", "joins");
        rows.push(Row(
            "gateway CPU per join and its leave (the burst)".into(),
            us(join),
            "at most 60 us".into(),
            join.map(|j| j <= 60.0),
        ));
    }
    let mut out = String::from("| figure | measured | target | met |\n|---|---|---|---|\n");
    for Row(figure, measured, target, met) in rows {
        let met = match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        out += &format!("| {figure} | {measured} | {target} | {met} |\n");
    }
    out
}

/// One change's fan-out: over every gateway of the queue run, and one gateway against Node.
fn fan_out_rows(results: &Path, cores: f64) -> Vec<Row> {
    let mut rows = Vec::new();
    if let Some(q) = Phase::read(results, "queue-fanout") {
        let clients =
            read(&results.join("memory.json")).map_or(0, |m| m["sessions"].as_u64().unwrap_or(0));
        let gateways = q.roles.get("gateway").map_or(0, |r| r.0);
        rows.push(Row(
            format!("gateway CPU per message sent, one change to {clients} clients on {gateways} gateways"),
            us(q.per("gateway", "messages")),
            String::new(),
            None,
        ));
        let share = q.cpu("gateway") / cores.max(1.0);
        let reading = loadgen_cpu(results, "queue", "/fan_out/loadgen_cpu") / cores.max(1.0);
        rows.push(Row(
            format!("the gateways' share of that change's wall time (their CPU over the {cores:.0} cores)"),
            format!("**{share:.2} s** (the load generators' reading: {reading:.2} s)"),
            "within 0.5 s for 100,000 clients".into(),
            Some(share <= 0.5),
        ));
    }
    let node = Phase::read(results, "peer-fanout-node").and_then(|p| p.per("node", "messages"));
    if let Some(f) = Phase::read(results, "peer-fanout-floodgate") {
        let ours = f.per("gateway", "messages");
        rows.push(Row(
            format!(
                "one gateway's CPU per message, one change to {:.0} clients",
                f.count("messages")
            ),
            us(ours),
            "at most 1/5 of Node's `ws` per message".into(),
            ours.zip(node).map(|(o, n)| o <= n / 5.0),
        ));
        rows.push(Row(
            "Node's `ws` CPU per message, each client its own JSON, as many clients".into(),
            us(node),
            ours.zip(node).map_or(String::new(), |(o, n)| {
                format!("the gateway's is {:.0} % of it", 100.0 * o / n)
            }),
            None,
        ));
    }
    rows
}

/// Where a booking phase ran, which its every figure states: single Redis or the cluster, the
/// replica wait, the requests in flight (the broker is Tansu on sqlite storage in every one).
struct Setup {
    /// The phase (`cpu-<phase>.json`) and the load generator's JSON (`<phase>.json`).
    phase: String,
    /// The consumer's phase over the same run, when the consumer read it.
    consume: Option<String>,
    /// `redis-benchmark` of the same scripts on the same Redis.
    reference: &'static str,
    /// "50 in flight, single Redis, no replica wait", ...
    label: String,
    /// Whose CPU "Redis" is here.
    redis: &'static str,
}

impl Setup {
    fn single(inflight: u32) -> Self {
        Self {
            phase: format!("raw-booking-{inflight}"),
            consume: Some(format!("raw-consume-{inflight}")),
            reference: "raw-redis.json",
            label: format!("{inflight} in flight, single Redis, no replica wait"),
            redis: "Redis",
        }
    }

    fn cluster(min_replicas: u32) -> Self {
        let wait = match min_replicas {
            0 => "no replica wait".to_owned(),
            n => format!("waiting for {n} replica"),
        };
        Self {
            phase: format!("cluster-booking-{min_replicas}"),
            consume: None,
            reference: "cluster-redis.json",
            label: format!("50 in flight, Redis Cluster of 3 primaries and 3 replicas, {wait}"),
            redis: "the cluster's six nodes'",
        }
    }
}

/// The booking endpoint in one setup: each process's CPU per 201, the rate against the scripts'
/// own, and the consumer's CPU per event.
fn booking_rows(results: &Path, setup: &Setup) -> Vec<Row> {
    let mut rows = Vec::new();
    let Some(b) = Phase::read(results, &setup.phase) else {
        return rows;
    };
    let label = &setup.label;
    let booking = b.per("booking", "reservations");
    let redis = b.per("redis", "reservations");
    let created = b.count("reservations");
    let scripts = (created > 0.0).then(|| b.count("evalsha_usec") / created);
    rows.push(Row(
        format!("booking CPU per 201, {label}"),
        us(booking),
        format!("at most 0.75x {} CPU per reservation", setup.redis),
        booking.zip(redis).map(|(b, r)| b <= 0.75 * r),
    ));
    rows.push(Row(
        format!(
            "{} CPU per reservation, {label} (of it in scripts, by `INFO commandstats`)",
            capitalised(setup.redis)
        ),
        format!(
            "{} ({})",
            us(redis),
            scripts.map_or("?".into(), |v| format!("{v:.1} us"))
        ),
        String::new(),
        None,
    ));
    if b.count("min_replicas") > 0.0 && created > 0.0 {
        rows.push(Row(
            format!("`WAIT` commands per reservation, {label} (the nodes' time in them)"),
            format!(
                "**{:.2}** ({:.1} us)",
                b.count("wait_calls") / created,
                b.count("wait_usec") / created
            ),
            String::new(),
            None,
        ));
    }
    rows.push(Row(
        format!("the broker's CPU per 201, {label}"),
        us(b.per("broker", "reservations")),
        String::new(),
        None,
    ));
    let rate =
        |file: &str| read(&results.join(file)).and_then(|r| r["reservations_per_second"].as_f64());
    if let (Some(raw), Some(ours)) = (
        rate(setup.reference),
        rate(&format!("{}.json", setup.phase)),
    ) {
        // No target: on two shared cores the rate is bounded by every other process's CPU
        // (Redis, the broker, the consumer, PostgreSQL), which the sum beside it shows.
        let share = ours / raw;
        let every =
            (created > 0.0).then(|| b.roles.keys().map(|r| b.cpu(r)).sum::<f64>() * 1e6 / created);
        rows.push(Row(
            format!("end-to-end rate, {label}, against `redis-benchmark` of the same scripts on the same Redis (every process's CPU per 201 summed)"),
            format!("**{:.0} %** ({ours:.0} against {raw:.0} a second; {})", 100.0 * share, us(every)),
            String::new(),
            None,
        ));
    }
    if let Some(c) = setup
        .consume
        .as_deref()
        .and_then(|c| Phase::read(results, c))
    {
        let postgres = c
            .per("postgres", "events")
            .map_or("?".into(), |v| format!("{v:.1} us"));
        rows.push(Row(
            format!("consumer CPU per event, {label} (PostgreSQL's beside it)"),
            format!("{} ({postgres})", us(c.per("consumer", "events"))),
            String::new(),
            None,
        ));
    }
    rows
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or(String::new(), |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// The load generators' own CPU at `pointer` in every `<prefix>-N.json`, summed (seconds).
fn loadgen_cpu(results: &Path, prefix: &str, pointer: &str) -> f64 {
    super::parts(results, prefix)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.pointer(pointer))
        .map(|c| c["user_s"].as_f64().unwrap_or(0.0) + c["system_s"].as_f64().unwrap_or(0.0))
        .sum()
}

/// A table per phase: each role's processes, user and system seconds, and CPU per unit counted.
pub fn by_phase(results: &Path) -> String {
    let mut out = String::new();
    for p in phases(results) {
        let unit = p.unit.clone();
        let counted = p
            .counts
            .as_object()
            .map(|c| {
                c.iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        out += &format!("**{}** ({:.1} s; {counted})\n\n", p.name, p.seconds);
        let per = unit.as_deref().map_or("per unit".into(), |u| {
            format!("per {}", u.trim_end_matches('s'))
        });
        out +=
            &format!("| role | processes | user s | system s | {per} |\n|---|---|---|---|---|\n");
        for (role, (n, user, system)) in &p.roles {
            let per = unit
                .as_deref()
                .and_then(|u| p.per(role, u))
                .map_or(String::new(), |v| format!("{v:.1} us"));
            out += &format!("| {role} | {n} | {user:.2} | {system:.2} | {per} |\n");
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_sums_its_roles_and_divides_by_its_counts() {
        let v = serde_json::json!({
            "phase": "raw-booking-50", "seconds": 4.0,
            "counts": {"reservations": 20000, "evalsha_usec": 900000},
            "processes": [
                {"name": "booking", "role": "booking", "user_s": 1.5, "system_s": 0.5},
                {"name": "postgres-1", "role": "postgres", "user_s": 0.1, "system_s": 0.1},
                {"name": "postgres-2", "role": "postgres", "user_s": 0.2, "system_s": 0.0},
            ]
        });
        let p = Phase::from_json(&v).unwrap();
        assert_eq!(p.roles["postgres"].0, 2);
        assert!((p.cpu("postgres") - 0.4).abs() < 1e-9);
        assert_eq!(p.per("booking", "reservations"), Some(100.0));
        assert_eq!(p.per("redis", "reservations"), None, "no such process");
        assert_eq!(p.per("booking", "nothing"), None);
    }
}
