//! Where the probes ask (issue 49): never behind the crowd, and never in the middle of a
//! migration.

use floodgate_tests::manifests::{name, of_kind, rendered, OVERLAYS};
use serde_yaml::Value;

use super::uptime::{deployment, pod};

/// The container port numbers of `c`'s probe `kind`, if it has one.
fn probe_port(c: &Value, kind: &str) -> Option<(String, u64)> {
    let probe = &c[kind];
    if probe.is_null() {
        return None;
    }
    let port = probe["httpGet"]["port"]
        .as_str()
        .or(probe["tcpSocket"]["port"].as_str())
        .unwrap_or_else(|| panic!("the {kind} names no port by name: {probe:?}"));
    let number = c["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port)
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no port {port}"));
    Some((port.to_owned(), number))
}

/// No probe waits behind the crowd: the gateways', the booking service's and the edge's are
/// asked on a port no Service sends the public or the edge to. On a public port the probe's SYN
/// is dropped with everyone's when the accept queue overflows at the opening, and a full gateway
/// accepts nothing: three misses, and every Pod would leave its Service at once (readiness), or
/// be restarted with everyone it holds (liveness).
#[test]
fn no_probe_waits_behind_the_crowd() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        for held in ["floodgate-gateway", "floodgate-booking", "floodgate-cdn"] {
            let workload = deployment(&docs, held);
            let c = &pod(workload)["containers"][0];
            // Every Service port that carries traffic to this workload (its admin Service aside).
            let served: Vec<u64> = of_kind(&docs, "Service")
                .into_iter()
                .filter(|s| !name(s).ends_with("-admin"))
                .filter(|s| s["spec"]["selector"]["app.kubernetes.io/name"] == held)
                .flat_map(|s| s["spec"]["ports"].as_sequence().unwrap().iter())
                .map(|p| {
                    let target = &p["targetPort"];
                    target.as_u64().unwrap_or_else(|| {
                        let named = target.as_str().unwrap_or_default();
                        c["ports"]
                            .as_sequence()
                            .unwrap()
                            .iter()
                            .find(|q| q["name"] == named)
                            .and_then(|q| q["containerPort"].as_u64())
                            .unwrap_or_else(|| p["port"].as_u64().unwrap())
                    })
                })
                .collect();
            assert!(!served.is_empty(), "{overlay}: no Service reaches {held}");
            assert!(
                probe_port(c, "readinessProbe").is_some(),
                "{overlay}: {held} has no readiness probe"
            );
            for kind in ["readinessProbe", "livenessProbe", "startupProbe"] {
                let Some((port, number)) = probe_port(c, kind) else {
                    continue;
                };
                assert!(
                    !served.contains(&number),
                    "{overlay}: {held}'s {kind} asks port {port} ({number}), which its Service \
                     sends the crowd to ({served:?})"
                );
            }
        }
    }
}

/// A booking or consumer Pod applies any migration still missing before its admin port opens
/// (the setup Job may be applying them beside it, and an index on a large table takes minutes):
/// a startup probe gives it five minutes before liveness may restart it, which would roll the
/// migration back halfway.
#[test]
fn no_pod_is_restarted_in_the_middle_of_a_migration() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        for migrates in ["floodgate-booking", "floodgate-consumer"] {
            let c = &pod(deployment(&docs, migrates))["containers"][0];
            let startup = &c["startupProbe"];
            let allowed = startup["periodSeconds"].as_u64().unwrap_or(10)
                * startup["failureThreshold"].as_u64().unwrap_or(3);
            assert!(
                !startup.is_null() && allowed >= 300,
                "{overlay}: {migrates} may be restarted {allowed} s into its start: {startup:?}"
            );
        }
    }
}
