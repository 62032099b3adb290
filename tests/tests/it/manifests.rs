//! What only a Kubernetes cluster could run, checked on the rendered manifests: the network
//! policy (every flow Floodgate needs allowed, everything else denied), the spread across zones,
//! the setup Job no Pod waits for, the CA files of private certificate authorities, the
//! Prometheus Operator's resources (labels, and the alert rules generated from
//! deploy/observability).

use floodgate_tests::containers::repo;
use floodgate_tests::manifests::{name, of_kind, rendered, settings, workloads, OVERLAYS};
use serde_yaml::Value;

mod autoscaling;
mod network;
mod readiness;
mod runbook_links;
mod setup;
mod uptime;

/// A zone lost takes at most its share of each kind of Pod: every Deployment spreads its Pods
/// across zones as well as nodes.
#[test]
fn every_workload_spreads_across_zones() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        for d in of_kind(&docs, "Deployment") {
            let spread = d["spec"]["template"]["spec"]["topologySpreadConstraints"]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|c| c["topologyKey"] == "topology.kubernetes.io/zone");
            assert!(spread, "{overlay}: {} is not spread across zones", name(d));
        }
    }
}

/// A Prometheus installed by kube-prometheus-stack selects ServiceMonitors and PrometheusRules
/// by its release's label: production's carry it, and docs/deploy.md's table of what to change
/// says to set it to the operator's own release.
#[test]
fn the_prometheus_operators_resources_carry_the_label_it_selects_by() {
    let docs = rendered("production");
    let mut releases = Vec::new();
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let found = of_kind(&docs, kind);
        assert!(!found.is_empty(), "production has a {kind}");
        for d in found {
            let release = d["metadata"]["labels"]["release"].as_str();
            assert!(release.is_some(), "{kind} {} has no release label", name(d));
            releases.push(release.unwrap().to_owned());
        }
    }
    releases.dedup();
    assert_eq!(releases.len(), 1, "one release label: {releases:?}");
    // Set in one place, which docs/deploy.md names.
    let setting = std::fs::read_to_string(
        repo().join("deploy/k8s/overlays/production/monitoring/kustomization.yaml"),
    )
    .unwrap();
    assert!(
        setting.contains(&format!("release: {}", releases[0])),
        "{setting}"
    );
    let deploy = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    assert!(
        deploy.lines().any(|l| l.starts_with("| `release` label")),
        "docs/deploy.md's table names the release label"
    );
}

/// The PrometheusRule is deploy/observability/alerts.yaml, wrapped: the same groups, rule for
/// rule, so the alerts Prometheus runs in Kubernetes are the ones `promtool` tests.
#[test]
fn the_prometheus_rule_is_the_shipped_alert_rules() {
    let alerts: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("deploy/observability/alerts.yaml")).unwrap(),
    )
    .unwrap();
    let docs = rendered("production");
    let rules = of_kind(&docs, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    assert_eq!(
        rules[0]["spec"]["groups"], alerts["groups"],
        "the PrometheusRule drifted from deploy/observability/alerts.yaml: regenerate it \
         (deploy/observability/prometheus-rule.sh)"
    );
}

/// With a private certificate authority (CloudNativePG's, RDS's, Cloud SQL's, a Redis
/// operator's), production verifies each dependency against that CA's file, mounted from the
/// `floodgate-ca` Secret; its database URL verifies the server's name too (docs/deploy.md).
#[test]
fn production_verifies_its_dependencies_against_their_ca_files() {
    let docs = rendered("production");
    for d in workloads(&docs) {
        let pod = &d["spec"]["template"]["spec"];
        let mounts_ca = |c: &Value| {
            c["volumeMounts"]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|m| m["mountPath"] == "/run/secrets/floodgate-ca")
        };
        for c in ["containers", "initContainers"]
            .iter()
            .filter_map(|k| pod[*k].as_sequence())
            .flatten()
        {
            let env = settings(&docs, c);
            let redis = env.contains_key("FLOODGATE_REDIS_CLUSTER_NODES_FILE");
            let postgres = env.contains_key("FLOODGATE_DATABASE_URL_FILE");
            if redis {
                assert_eq!(
                    env.get("FLOODGATE_REDIS_TLS_CA_FILE").map(String::as_str),
                    Some("/run/secrets/floodgate-ca/redis-ca.crt"),
                    "{}/{}",
                    name(d),
                    c["name"].as_str().unwrap()
                );
            }
            if redis || postgres {
                assert!(
                    mounts_ca(c),
                    "{}/{} mounts no CA",
                    name(d),
                    c["name"].as_str().unwrap()
                );
            }
        }
    }
    let deploy = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    assert!(
        deploy
            .contains("sslmode=verify-full&sslrootcert=/run/secrets/floodgate-ca/postgres-ca.crt"),
        "docs/deploy.md's database URL verifies against the mounted CA"
    );
}

/// The edge reaches the gateways through their Service: one address. Listed once, nginx has no
/// other upstream to try when a gateway answers 503 (draining, full); listed several times,
/// each try is a new connection through the Service, which kube-proxy sends to a Pod of its
/// choosing.
#[test]
fn the_edge_can_try_another_gateway() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        let edge = docs
            .iter()
            .find(|d| d["kind"] == "Deployment" && name(d) == "floodgate-cdn")
            .unwrap();
        let c = &edge["spec"]["template"]["spec"]["containers"][0];
        let gateways = settings(&docs, c)["FLOODGATE_EDGE_GATEWAYS"].clone();
        let tries = gateways
            .split(',')
            .filter(|g| g.trim().starts_with("floodgate-gateway:"))
            .count();
        assert!(
            tries >= 3,
            "{overlay}: the edge has {tries} ways to a gateway: {gateways}"
        );
    }
}

/// Every container of every workload, init containers too, says what it needs and may use (CPU
/// and memory requests, a memory limit): a namespace with a ResourceQuota refuses a Pod with a
/// container that says nothing, and a LimitRange would give it a default nobody chose.
#[test]
fn every_container_states_its_resources_init_containers_too() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        for workload in workloads(&docs) {
            let spec = &workload["spec"]["template"]["spec"];
            let containers = ["initContainers", "containers"]
                .iter()
                .flat_map(|kind| spec[*kind].as_sequence().cloned().unwrap_or_default());
            for c in containers {
                let what = format!(
                    "{overlay}: {}/{}",
                    name(workload),
                    c["name"].as_str().unwrap()
                );
                let resources = &c["resources"];
                for (part, key) in [
                    ("requests", "cpu"),
                    ("requests", "memory"),
                    ("limits", "memory"),
                ] {
                    assert!(
                        resources[part][key].as_str().is_some(),
                        "{what} has no {part}.{key}"
                    );
                }
            }
        }
    }
}
