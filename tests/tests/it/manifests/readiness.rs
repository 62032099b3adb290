//! Where the readiness probes ask (issue 49): never behind the crowd.

use floodgate_tests::manifests::{name, of_kind, rendered, OVERLAYS};

use super::uptime::{deployment, pod};

/// No readiness probe waits behind the crowd: the gateways', the booking service's and the
/// edge's are asked on a port no Service sends the public or the edge to. On a public port the
/// probe's SYN is dropped with everyone's when the accept queue overflows at the opening, and a
/// full gateway accepts nothing: three misses, and every Pod would leave its Service at once.
#[test]
fn no_readiness_probe_waits_behind_the_crowd() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        for held in ["floodgate-gateway", "floodgate-booking", "floodgate-cdn"] {
            let workload = deployment(&docs, held);
            let c = &pod(workload)["containers"][0];
            let probe = &c["readinessProbe"];
            let port = probe["httpGet"]["port"]
                .as_str()
                .or(probe["tcpSocket"]["port"].as_str())
                .unwrap_or_else(|| panic!("{overlay}: {held}'s probe names no port: {probe:?}"));
            let number = c["ports"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|p| p["name"] == port)
                .and_then(|p| p["containerPort"].as_u64())
                .unwrap_or_else(|| panic!("{overlay}: {held} has no port {port}"));
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
                !served.contains(&number),
                "{overlay}: {held}'s readiness probe asks port {port} ({number}), which its \
                 Service sends the crowd to ({served:?})"
            );
        }
    }
}
