//! How the Pods holding people scale (issue 49): on what binds them, before they are full.

use std::collections::BTreeSet;

use super::uptime::{deployment, pod, quantity};
use floodgate_tests::containers::repo;
use floodgate_tests::manifests::{of_kind, rendered, OVERLAYS};

/// What binds a gateway or an edge while people wait is the sockets it holds, and their memory,
/// not CPU (a waiting room is quiet between ticks): each autoscaler scales on memory as well as
/// CPU, so a crowd that fills the Pods' memory adds Pods before the gateways shed joins as full.
#[test]
fn the_pods_holding_people_scale_on_their_memory() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        for held in ["floodgate-gateway", "floodgate-cdn"] {
            let autoscaler = of_kind(&docs, "HorizontalPodAutoscaler")
                .into_iter()
                .find(|h| h["spec"]["scaleTargetRef"]["name"] == held)
                .unwrap_or_else(|| panic!("{overlay}: no autoscaler for {held}"));
            let resources: BTreeSet<&str> = autoscaler["spec"]["metrics"]
                .as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|m| m["resource"]["name"].as_str())
                .collect();
            assert!(
                resources.contains("memory") && resources.contains("cpu"),
                "{overlay}: {held} scales on {resources:?}"
            );
        }
    }
}

/// The gateways' memory target is reached while a gateway is between a quarter and three
/// quarters full: the session budget is sized at 16 KB a session (gateway/src/budget.rs, under
/// the memory limit less its reserve), and a session costs about a tenth of that
/// (BENCHMARKS.md's "gateway memory per idle connection"), so a target near the usual 60 % would
/// be reached by no gateway before it refuses joins as full.
#[test]
fn the_gateways_memory_target_is_reached_before_they_are_full() {
    use floodgate_gateway::budget::{BYTES_PER_SESSION, RESERVE_BYTES};
    let benchmarks = std::fs::read_to_string(repo().join("BENCHMARKS.md")).unwrap();
    let row = benchmarks
        .lines()
        .find(|l| l.starts_with("| gateway memory per idle connection |"))
        .expect("BENCHMARKS.md's gateway memory row");
    let number_after = |text: &str, before: &str| -> f64 {
        let rest = &text[text
            .find(before)
            .unwrap_or_else(|| panic!("{before} in {text}"))
            + before.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().unwrap()
    };
    let per_session = number_after(row, "**") * 1000.0;
    let processes = benchmarks
        .lines()
        .find(|l| l.starts_with("| sessions held |"))
        .map(|l| number_after(l, " on "))
        .expect("BENCHMARKS.md's sessions row");
    // The first RSS is the gateway processes' own, before any session.
    let base = number_after(row, "RSS ") * 1024.0 / processes;
    let docs = rendered("production");
    let gateway = &pod(deployment(&docs, "floodgate-gateway"))["containers"][0];
    let request = quantity(&gateway["resources"]["requests"]["memory"]).unwrap();
    let limit = quantity(&gateway["resources"]["limits"]["memory"]).unwrap();
    let budget = (limit - RESERVE_BYTES as f64) / BYTES_PER_SESSION as f64;
    let autoscaler = of_kind(&docs, "HorizontalPodAutoscaler")
        .into_iter()
        .find(|h| h["spec"]["scaleTargetRef"]["name"] == "floodgate-gateway")
        .unwrap();
    let target = autoscaler["spec"]["metrics"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["resource"]["name"] == "memory")
        .and_then(|m| m["resource"]["target"]["averageUtilization"].as_f64())
        .expect("a memory target");
    let sessions_at_target = (target / 100.0 * request - base) / per_session;
    let fill = sessions_at_target / budget;
    assert!(
        (0.25..=0.75).contains(&fill),
        "the gateways' memory target ({target} %) is reached at {sessions_at_target:.0} sessions, \
         {:.0} % of a gateway's budget of {budget:.0}",
        fill * 100.0
    );
}
