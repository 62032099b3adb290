//! The booking endpoint on a private Redis Cluster (`deploy/bench.sh cluster`): its rate without
//! and with the wait for a replica, against `redis-benchmark` of the same scripts on the
//! primaries that serve them. The per-process CPU of the same runs is in the headline (`cpu`).

use std::path::Path;

use super::read;
use crate::report::Latencies;

/// The booking endpoint on the Redis Cluster, without and with the replica wait, against
/// `redis-benchmark` of the same scripts on the primaries that serve them.
pub fn section(results: &Path) -> String {
    let reference = read(&results.join("cluster-redis.json"));
    let runs = [0, 1].map(|min| read(&results.join(format!("cluster-booking-{min}.json"))));
    if reference.is_none() && runs.iter().all(Option::is_none) {
        return String::new();
    }
    let mut out = String::from(
        "### Booking on the Redis Cluster\n\nA private cluster of three primaries and three \
         replicas (each with its append-only file) on the same two cores; the booking service \
         alone on it, 50 requests in flight, the broker Tansu on sqlite storage.\n\n\
         | figure | per second | |\n|---|---|---|\n",
    );
    let raw = reference
        .as_ref()
        .and_then(|r| r["reservations_per_second"].as_f64())
        .unwrap_or(0.0);
    for script in reference
        .as_ref()
        .and_then(|r| r["scripts"].as_array())
        .into_iter()
        .flatten()
    {
        out += &format!(
            "| `redis-benchmark`: `{}` as a reservation sends it, on the primary at port {}, 50 connections, unpipelined | {:.0} | |\n",
            script["script"].as_str().unwrap_or("?"),
            script["port"],
            script["per_second"].as_f64().unwrap_or(0.0)
        );
    }
    out += &format!("| the three as one reservation, on the busiest primary | **{raw:.0}** | |\n");
    for (min, run) in runs.iter().enumerate() {
        let Some(run) = run else { continue };
        let rate = run["reservations_per_second"].as_f64().unwrap_or(0.0);
        out += &format!(
            "| the booking endpoint end to end, {} (`FLOODGATE_REDIS_MIN_REPLICAS={min}`); 201 latency p50 / p99 / max {} | **{rate:.0}** | **{:.0} %** of the scripts' rate (no target: on two shared cores the other processes' CPU bounds it) |\n",
            if min == 0 { "no replica wait" } else { "waiting for a replica" },
            Latencies::describe(&run["latency_ms"]),
            100.0 * rate / raw.max(1e-9)
        );
    }
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::render;

    #[test]
    fn the_cluster_runs_state_their_setup_and_their_waits() {
        let dir = std::env::temp_dir().join(format!("fg-md-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, v: Value| std::fs::write(dir.join(name), v.to_string()).unwrap();
        write(
            "cluster-redis.json",
            serde_json::json!({"reservations_per_second": 4000.0, "scripts": [
                {"script": "claim_token", "per_second": 40000.0, "port": 7221}]}),
        );
        let phase = |min: u32, booking: f64, waits: u32| {
            serde_json::json!({"phase": format!("cluster-booking-{min}"), "seconds": 10.0,
            "counts": {"reservations": 10000, "min_replicas": min, "evalsha_calls": 30000,
                "evalsha_usec": 1_000_000, "wait_calls": waits, "wait_usec": 50_000},
            "processes": [
                {"name": "booking", "role": "booking", "user_s": booking, "system_s": 0.0},
                {"name": "redis-7221", "role": "redis", "user_s": 0.5, "system_s": 0.0},
                {"name": "redis-7224", "role": "redis", "user_s": 0.5, "system_s": 0.0},
            ]})
        };
        write("cpu-cluster-booking-0.json", phase(0, 0.7, 0));
        write("cpu-cluster-booking-1.json", phase(1, 2.0, 4000));
        for min in [0, 1] {
            write(
                &format!("cluster-booking-{min}.json"),
                serde_json::json!({"reservations_per_second": 1000.0 + 1000.0 * f64::from(min)}),
            );
        }
        let text = render(&dir).unwrap();
        let line = |needle: &str| super::super::line_with(&text, needle);
        // Every node's CPU is Redis' (100 us a reservation): 70 us of booking meets the target
        // (at most 0.75x), 200 us does not.
        let off = line("booking CPU per 201, 50 in flight, Redis Cluster of 3 primaries and 3 replicas, no replica wait");
        assert!(
            off.contains("**70.0 us**") && off.ends_with("| yes |"),
            "{off}"
        );
        let on = line("booking CPU per 201, 50 in flight, Redis Cluster of 3 primaries and 3 replicas, waiting for 1 replica");
        assert!(
            on.contains("**200.0 us**") && on.ends_with("| **no** |"),
            "{on}"
        );
        assert!(line("`WAIT` commands per reservation").contains("**0.40** (5.0 us)"));
        assert_eq!(
            text.matches("`WAIT` commands per reservation").count(),
            1,
            "no waits without the replica setting: {text}"
        );
        let share = line(
            "end-to-end rate, 50 in flight, Redis Cluster of 3 primaries and 3 replicas, waiting",
        );
        assert!(share.contains("**50 %** (2000 against 4000"), "{share}");
        assert!(line("on the primary at port 7221").contains("| 40000 |"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
