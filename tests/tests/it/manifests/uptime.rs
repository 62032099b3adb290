//! What keeps the rendered manifests up at the opening (issue 49): the edge has source ports for
//! every client it says it holds, the Pods holding people are neither evicted nor preempted nor
//! restarted for a slow second, and the edge outlasts the load balancer's deregistration.

use std::collections::BTreeSet;

use floodgate_tests::containers::repo;
use floodgate_tests::manifests::{name, of_kind, rendered, settings, OVERLAYS};
use serde_yaml::Value;

pub(super) fn deployment<'a>(docs: &'a [Value], wanted: &str) -> &'a Value {
    of_kind(docs, "Deployment")
        .into_iter()
        .find(|d| name(d) == wanted)
        .unwrap_or_else(|| panic!("no Deployment {wanted}"))
}

pub(super) fn pod(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

/// Kubernetes' quantities as the manifests write them: cores (`2`, `500m`) and bytes (`4Gi`).
pub(super) fn quantity(q: &Value) -> Option<f64> {
    let text = match q {
        Value::Number(n) => return n.as_f64(),
        Value::String(s) => s.as_str(),
        _ => return None,
    };
    let (digits, unit) =
        text.split_at(text.find(|c: char| c.is_alphabetic()).unwrap_or(text.len()));
    let scale = match unit {
        "" => 1.0,
        "m" => 0.001,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    digits.parse::<f64>().ok().map(|d| d * scale)
}

/// The Pods that hold people (every gateway holds a socket per waiting person, every edge two)
/// are in the Guaranteed class in production (the local overlay asks for little, to fit a
/// laptop), outrank ordinary work, and tell a consolidating autoscaler to leave them be; booking
/// and consumers share the priority.
#[test]
fn the_pods_holding_people_are_neither_evicted_nor_preempted() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        let classes: BTreeSet<&str> = of_kind(&docs, "PriorityClass")
            .into_iter()
            .filter(|c| {
                c["value"]
                    .as_i64()
                    .is_some_and(|v| v > 0 && v < 1_000_000_000)
            })
            .map(name)
            .collect();
        for workload in of_kind(&docs, "Deployment") {
            let what = format!("{overlay}: {}", name(workload));
            if name(workload) == "floodgate-sandbox" {
                continue;
            }
            let class = pod(workload)["priorityClassName"].as_str();
            assert!(
                class.is_some_and(|c| classes.contains(c)),
                "{what}: priority class {class:?}, of {classes:?}"
            );
        }
        for held in ["floodgate-gateway", "floodgate-cdn"] {
            let workload = deployment(&docs, held);
            let what = format!("{overlay}: {held}");
            let containers = pod(workload)["containers"].as_sequence().unwrap();
            for c in containers.iter().filter(|_| overlay == "production") {
                for resource in ["cpu", "memory"] {
                    let requests = quantity(&c["resources"]["requests"][resource]);
                    let limits = quantity(&c["resources"]["limits"][resource]);
                    assert!(
                        requests.is_some() && requests == limits,
                        "{what}: {resource} requests {requests:?} and limits {limits:?} differ"
                    );
                }
            }
            // A rollout lets each new Pod serve a while before the next old one stops, so the
            // people of a stopped one do not land on the next to stop.
            assert!(
                workload["spec"]["minReadySeconds"]
                    .as_u64()
                    .is_some_and(|s| s >= 30),
                "{what}: minReadySeconds"
            );
            let annotations = &workload["spec"]["template"]["metadata"]["annotations"];
            assert_eq!(
                annotations["karpenter.sh/do-not-disrupt"].as_str(),
                Some("true"),
                "{what}"
            );
            assert_eq!(
                annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"].as_str(),
                Some("false"),
                "{what}"
            );
        }
    }
}

/// A probe that fails on one slow answer takes a busy Pod out, or restarts it, at the worst
/// moment: every probe allows 3 s an answer and three misses, and liveness a full minute.
#[test]
fn no_probe_gives_up_on_a_slow_second() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        // The local overlay's stand-in payment provider aside: it holds nobody.
        let workloads = of_kind(&docs, "Deployment")
            .into_iter()
            .filter(|w| name(w) != "floodgate-sandbox");
        for workload in workloads {
            for c in pod(workload)["containers"].as_sequence().unwrap() {
                for kind in ["readinessProbe", "livenessProbe"] {
                    let probe = &c[kind];
                    if probe.is_null() {
                        continue;
                    }
                    let what = format!("{overlay}: {} {kind}", name(workload));
                    let field = |f: &str, default: u64| probe[f].as_u64().unwrap_or(default);
                    assert!(field("timeoutSeconds", 1) >= 3, "{what}: {probe:?}");
                    assert!(field("failureThreshold", 3) >= 3, "{what}: {probe:?}");
                    if kind == "livenessProbe" {
                        let silence = field("periodSeconds", 10) * field("failureThreshold", 3);
                        assert!(silence >= 60, "{what}: restarted after {silence} s");
                    }
                }
            }
        }
    }
}

/// The ports of the gateways' Service that the edge names, each followed to the gateway
/// container's port it reaches: (the Service's port, the container's port).
fn edge_destinations(docs: &[Value]) -> Vec<(u64, u64)> {
    let edge = deployment(docs, "floodgate-cdn");
    let named = settings(docs, &pod(edge)["containers"][0])["FLOODGATE_EDGE_GATEWAYS"].clone();
    let service = of_kind(docs, "Service")
        .into_iter()
        .find(|s| name(s) == "floodgate-gateway")
        .unwrap();
    let gateway = &pod(deployment(docs, "floodgate-gateway"))["containers"][0];
    named
        .split(',')
        .map(|entry| {
            let (host, port) = entry.trim().rsplit_once(':').unwrap();
            assert_eq!(host, "floodgate-gateway", "{named}");
            let port: u64 = port.parse().unwrap();
            let target = service["spec"]["ports"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|p| p["port"].as_u64() == Some(port))
                .unwrap_or_else(|| panic!("the gateways' Service has no port {port}"))
                ["targetPort"]
                .clone();
            let container_port = match &target {
                Value::Number(n) => n.as_u64().unwrap(),
                Value::String(port_name) => gateway["ports"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .find(|p| p["name"].as_str() == Some(port_name))
                    .unwrap_or_else(|| panic!("the gateway has no port {port_name}"))
                    ["containerPort"]
                    .as_u64()
                    .unwrap(),
                _ => panic!("targetPort {target:?}"),
            };
            (port, container_port)
        })
        .collect()
}

/// An edge Pod opens one connection to the gateways for each waiting client, and every one to
/// the same (address, port) takes a source port of the Pod's range: the distinct destinations
/// it names, times the range, hold the clients its workers can take (each client two of their
/// connections), with room for those closing (TIME_WAIT). Each destination reaches a port of
/// its own on the gateway, which listens on it: two Service ports onto one container port would
/// clash in the node's connection tracking once translated.
#[test]
fn the_edge_has_a_source_port_for_every_client_it_holds() {
    let conf = std::fs::read_to_string(repo().join("deploy/nginx/cdn.conf")).unwrap();
    let per_worker: u64 = conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("worker_connections "))
        .and_then(|v| v.trim_end_matches(';').parse().ok())
        .expect("cdn.conf sets worker_connections");
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        let edge = deployment(&docs, "floodgate-cdn");
        let env = settings(&docs, &pod(edge)["containers"][0]);
        let workers: u64 = env["FLOODGATE_EDGE_WORKERS"].parse().unwrap();
        let clients = workers * per_worker / 2;

        let range = pod(edge)["securityContext"]["sysctls"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == "net.ipv4.ip_local_port_range")
            .and_then(|s| s["value"].as_str())
            .unwrap_or("32768 60999");
        let (low, high) = range.split_once(' ').unwrap();
        let (low, high): (u64, u64) = (low.parse().unwrap(), high.trim().parse().unwrap());
        let edge_port: u64 = env["FLOODGATE_EDGE_LISTEN"].parse().unwrap();
        assert!(
            !(low..=high).contains(&edge_port),
            "{overlay}: the edge's own port {edge_port} lies in its source ports {range}"
        );

        let destinations = edge_destinations(&docs);
        let container_ports: BTreeSet<u64> = destinations.iter().map(|(_, c)| *c).collect();
        assert_eq!(
            container_ports.len(),
            destinations.len(),
            "{overlay}: two of the edge's destinations reach one gateway port: {destinations:?}"
        );
        let gateway = &pod(deployment(&docs, "floodgate-gateway"))["containers"][0];
        let listening = settings(&docs, gateway)["FLOODGATE_GATEWAY_LISTEN"].clone();
        for port in &container_ports {
            assert!(
                listening
                    .split(',')
                    .any(|a| a.ends_with(&format!(":{port}"))),
                "{overlay}: the gateway does not listen on {port}: {listening}"
            );
        }
        let ports = (high - low + 1) * destinations.len() as u64;
        assert!(
            ports >= clients * 3 / 2,
            "{overlay}: {ports} source ports for {clients} clients ({range}, {} destinations)",
            destinations.len()
        );
    }
}

/// A stopping edge serves on until the load balancer has stopped sending it new connections:
/// its pause before nginx stops is longer than the sample load balancer's deregistration and
/// than the two minutes an NLB with IP targets takes to let go whatever its delay, and its grace
/// longer than the pause. The sample keeps the client's address.
#[test]
fn the_edge_outlasts_the_load_balancers_deregistration() {
    let docs = rendered("production");
    let edge = deployment(&docs, "floodgate-cdn");
    let pause = pod(edge)["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .expect("a preStop sleep");
    let grace = pod(edge)["terminationGracePeriodSeconds"].as_u64().unwrap();
    // After the pause nginx stops gracefully: what is left is closed after
    // worker_shutdown_timeout.
    let conf = std::fs::read_to_string(repo().join("deploy/nginx/cdn.conf")).unwrap();
    let shutdown: u64 = conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("worker_shutdown_timeout "))
        .and_then(|v| v.trim_end_matches(';').trim_end_matches('s').parse().ok())
        .expect("cdn.conf sets worker_shutdown_timeout in seconds");
    assert!(
        grace >= pause + shutdown + 10,
        "grace {grace} s for a pause of {pause} s and a stop of {shutdown} s"
    );
    let public = of_kind(&docs, "Service")
        .into_iter()
        .find(|s| s["spec"]["type"] == "LoadBalancer")
        .expect("a sample LoadBalancer Service");
    assert_eq!(public["spec"]["externalTrafficPolicy"], "Local");
    let attributes = public["metadata"]["annotations"]
        ["service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"]
        .as_str()
        .unwrap();
    let deregistration: u64 = attributes
        .split(',')
        .find_map(|a| a.strip_prefix("deregistration_delay.timeout_seconds="))
        .and_then(|v| v.parse().ok())
        .expect("a deregistration delay");
    // An edge found unhealthy (a connection not taken at the opening) keeps its people, and is
    // checked where the crowd does not queue.
    assert!(
        attributes.contains("target_health_state.unhealthy.connection_termination.enabled=false"),
        "{attributes}"
    );
    assert_eq!(
        public["metadata"]["annotations"]
            ["service.beta.kubernetes.io/aws-load-balancer-healthcheck-port"],
        "8001"
    );
    assert!(
        pause > deregistration.max(NLB_LETS_GO_AFTER),
        "the edge stops {pause} s after it is told to, the load balancer lets go after \
         {deregistration} s (and an NLB's IP targets after {NLB_LETS_GO_AFTER} s)"
    );
}

/// How long an AWS NLB with IP targets may still send a deregistering target new connections,
/// whatever its deregistration delay: about two minutes, as measured and reported in
/// kubernetes-sigs/aws-load-balancer-controller issues 2366 and 3270.
const NLB_LETS_GO_AFTER: u64 = 120;

/// Behind a CDN or an L7 load balancer, the production overlay's `real-ip.yaml` gives the edge the
/// hop's ranges: applied as its kustomization's comment says, the edge's container has the
/// setting beside every one it had.
#[test]
fn the_real_ip_patch_gives_the_edge_its_hops_ranges() {
    let production = repo().join("deploy/k8s/overlays/production");
    let kustomization = std::fs::read_to_string(production.join("kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains("# - real-ip.yaml"),
        "{kustomization}"
    );
    // A copy of deploy/k8s and deploy/nginx (kustomize takes no base outside the tree it
    // renders), the patch turned on as the comment says.
    let dir = std::env::temp_dir().join(floodgate_tests::unique("real-ip-"));
    for part in ["deploy/k8s", "deploy/nginx"] {
        copy_tree(&repo().join(part), &dir.join(part));
    }
    let overlay = dir.join("deploy/k8s/overlays/production");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        kustomization.replace("# - real-ip.yaml", "- real-ip.yaml"),
    )
    .unwrap();
    let edge_settings = |docs: &[Value]| {
        let edge = &pod(deployment(docs, "floodgate-cdn"))["containers"][0];
        settings(docs, edge)
    };
    let before = edge_settings(&rendered("production"));
    let after = edge_settings(&floodgate_tests::manifests::rendered_at(&overlay));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        after.get("FLOODGATE_EDGE_REAL_IP_FROM").map(String::as_str),
        Some("198.51.100.0/24, 2001:db8:cd::/48")
    );
    for (name, value) in &before {
        assert_eq!(after.get(name), Some(value), "{name} kept");
    }
}

pub(super) fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
