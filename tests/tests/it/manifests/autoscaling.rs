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
/// the memory limit less its reserve), and a session costs well under half that of what the
/// limit counts (BENCHMARKS.md's "gateway memory per idle connection", and a socket's kernel
/// memory, a quarter of "kernel, all four sockets" in its edge memory table), so a target near
/// the usual 60 % would be reached by no gateway before it refuses joins as full. Their CPU
/// target is the share of its cores the sale simulator sizes each gateway for.
#[test]
fn the_gateways_targets_are_reached_before_they_are_full() {
    use floodgate_gateway::budget::{BYTES_PER_SESSION, RESERVE_BYTES};
    let benchmarks = std::fs::read_to_string(repo().join("BENCHMARKS.md")).unwrap();
    let number_after = |text: &str, before: &str| -> f64 {
        let at = text
            .find(before)
            .unwrap_or_else(|| panic!("{before} in {text}"));
        let rest = &text[at + before.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .unwrap_or(rest.len());
        rest[..end].replace(',', "").parse().unwrap()
    };
    let row = |start: &str| {
        benchmarks
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("BENCHMARKS.md has no row {start}"))
    };
    let memory = row("| gateway memory per idle connection |");
    let processes = number_after(row("| sessions held |"), " on ");
    // The edge's table: the shipped configuration's row, its kernel column (the larger of a
    // range): four sockets a waiting client.
    let shipped = benchmarks
        .lines()
        .filter(|l| l.contains("as shipped"))
        .find(|l| l.contains("proxy_buffer_size 2k"))
        .expect("BENCHMARKS.md's edge memory row as shipped");
    let kernel_column = shipped.split('|').nth(6).unwrap().trim();
    let kernel_per_socket = kernel_column
        .trim_end_matches(" KB")
        .rsplit('-')
        .next()
        .unwrap()
        .parse::<f64>()
        .unwrap()
        * 1000.0
        / 4.0;
    let per_session = number_after(memory, "**") * 1000.0 + kernel_per_socket;
    // The first RSS is the gateway processes' own, before any session.
    let base = number_after(memory, "RSS ") * 1024.0 / processes;
    let docs = rendered("production");
    let gateway = &pod(deployment(&docs, "floodgate-gateway"))["containers"][0];
    let request = quantity(&gateway["resources"]["requests"]["memory"]).unwrap();
    let limit = quantity(&gateway["resources"]["limits"]["memory"]).unwrap();
    let budget = (limit - RESERVE_BYTES as f64) / BYTES_PER_SESSION as f64;
    let autoscaler = of_kind(&docs, "HorizontalPodAutoscaler")
        .into_iter()
        .find(|h| h["spec"]["scaleTargetRef"]["name"] == "floodgate-gateway")
        .unwrap();
    let target = |resource: &str| {
        autoscaler["spec"]["metrics"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["resource"]["name"] == resource)
            .and_then(|m| m["resource"]["target"]["averageUtilization"].as_f64())
            .unwrap_or_else(|| panic!("a {resource} target"))
    };
    let sessions_at_target = (target("memory") / 100.0 * request - base) / per_session;
    let fill = sessions_at_target / budget;
    assert!(
        (0.25..=0.75).contains(&fill),
        "the gateways' memory target ({} %) is reached at {sessions_at_target:.0} sessions, \
         {:.0} % of a gateway's budget of {budget:.0}",
        target("memory"),
        fill * 100.0
    );
    let plan = std::fs::read_to_string(repo().join("loadgen/src/simulate/plan.rs")).unwrap();
    let headroom = number_after(&plan, "pub const HEADROOM: f64 = ");
    assert_eq!(
        target("cpu"),
        headroom * 100.0,
        "the gateways' CPU target is the simulator's headroom"
    );
}
