//! What only a Kubernetes cluster could run, checked on the rendered manifests: the network
//! policy (every flow Floodgate needs allowed, everything else denied), the spread across zones,
//! the setup Job no Pod waits for, the CA files of private certificate authorities, the
//! Prometheus Operator's resources (labels, and the alert rules generated from
//! deploy/observability).

use std::collections::BTreeMap;

use floodgate_tests::containers::repo;
use floodgate_tests::manifests::{name, of_kind, rendered, settings, workloads, OVERLAYS};
use serde_yaml::Value;

mod autoscaling;
mod readiness;
mod runbook_links;
mod uptime;

/// The pod labels of each workload in `docs`, by workload name.
fn pod_labels(docs: &[Value]) -> BTreeMap<String, BTreeMap<String, String>> {
    workloads(docs)
        .into_iter()
        .map(|d| {
            let labels = d["spec"]["template"]["metadata"]["labels"]
                .as_mapping()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            (
                                k.as_str().unwrap().to_owned(),
                                v.as_str().unwrap().to_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (name(d).to_owned(), labels)
        })
        .collect()
}

/// Whether a label selector (`matchLabels`, `matchExpressions` with In) selects `labels`.
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector["matchLabels"].as_mapping().is_none_or(|m| {
        m.iter()
            .all(|(k, v)| labels.get(k.as_str().unwrap()).map(String::as_str) == v.as_str())
    });
    let by_expressions = selector["matchExpressions"]
        .as_sequence()
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                assert_eq!(e["operator"], "In", "only In is used");
                let key = e["key"].as_str().unwrap();
                e["values"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .any(|v| labels.get(key).map(String::as_str) == v.as_str())
            })
        });
    by_labels && by_expressions
}

/// Who is at one end of a flow.
#[derive(Clone, Copy, Debug)]
enum Peer<'a> {
    /// A workload of the manifests, by name.
    Pod(&'a str),
    /// A Pod of another namespace, by the namespace's name and whether it carries the label
    /// that lets Prometheus in (`floodgate.dev/scrapes=true`).
    Namespace(&'a str, bool),
    /// Anything outside the cluster (a browser, a managed Redis, Kafka or PostgreSQL, the
    /// payment provider).
    Outside,
}

/// Whether one `from`/`to` entry of a policy rule admits `peer`.
fn admits(entry: &Value, peer: Peer, labels: &BTreeMap<String, BTreeMap<String, String>>) -> bool {
    match peer {
        Peer::Pod(workload) => {
            entry["namespaceSelector"].is_null()
                && entry["ipBlock"].is_null()
                && selects(&entry["podSelector"], &labels[workload])
        }
        Peer::Namespace(name, labelled) => {
            let mut ns: BTreeMap<String, String> =
                [("kubernetes.io/metadata.name".to_owned(), name.to_owned())].into();
            if labelled {
                ns.insert("floodgate.dev/scrapes".to_owned(), "true".to_owned());
            }
            !entry["namespaceSelector"].is_null() && selects(&entry["namespaceSelector"], &ns)
        }
        Peer::Outside => entry["ipBlock"]["cidr"] == "0.0.0.0/0",
    }
}

/// Whether a rule's `ports` admit `port` over TCP (none listed: every port).
fn admits_port(rule: &Value, port: u16, protocol: &str) -> bool {
    rule["ports"].as_sequence().is_none_or(|ports| {
        ports.iter().any(|p| {
            p["port"].as_u64() == Some(u64::from(port))
                && p["protocol"].as_str().unwrap_or("TCP") == protocol
        })
    })
}

/// Whether the policies of `docs` let `from` reach `to` on `port`: the sender's egress and the
/// receiver's ingress must both allow it (a side no policy selects allows all, as in Kubernetes).
fn allowed(docs: &[Value], from: Peer, to: Peer, port: u16, protocol: &str) -> bool {
    let labels = pod_labels(docs);
    let policies = of_kind(docs, "NetworkPolicy");
    let side = |me: Peer, other: Peer, direction: &str, peers: &str| -> bool {
        let Peer::Pod(workload) = me else {
            return true;
        };
        let governing: Vec<&&Value> = policies
            .iter()
            .filter(|p| selects(&p["spec"]["podSelector"], &labels[workload]))
            .filter(|p| {
                p["spec"]["policyTypes"]
                    .as_sequence()
                    .is_some_and(|t| t.iter().any(|t| t == direction))
            })
            .collect();
        if governing.is_empty() {
            return true;
        }
        let key = direction.to_lowercase();
        governing.iter().any(|p| {
            p["spec"][key.as_str()]
                .as_sequence()
                .into_iter()
                .flatten()
                .any(|rule| {
                    let peers_ok = rule[peers]
                        .as_sequence()
                        .is_none_or(|entries| entries.iter().any(|e| admits(e, other, &labels)));
                    peers_ok && admits_port(rule, port, protocol)
                })
        })
    };
    side(from, to, "Egress", "to") && side(to, from, "Ingress", "from")
}

/// Every flow Floodgate needs, in every overlay; nothing else between its parts.
#[test]
fn a_default_deny_network_policy_lets_through_only_what_floodgate_needs() {
    use Peer::{Namespace, Outside, Pod};
    // Prometheus where kube-prometheus-stack puts it, or in a namespace of the operator's own
    // that carries the label; nothing from another namespace.
    let (monitoring, labelled, elsewhere) = (
        Namespace("monitoring", false),
        Namespace("observability", true),
        Namespace("observability", false),
    );
    let (gateway, booking, consumer, cdn, setup) = (
        Pod("floodgate-gateway"),
        Pod("floodgate-booking"),
        Pod("floodgate-consumer"),
        Pod("floodgate-cdn"),
        Pod("floodgate-setup"),
    );
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        // Every Floodgate Pod (the operator's own in the same namespace are not Floodgate's to
        // shut).
        let labels = pod_labels(&docs);
        let deny_all = of_kind(&docs, "NetworkPolicy").into_iter().any(|p| {
            [
                "floodgate-gateway",
                "floodgate-booking",
                "floodgate-consumer",
                "floodgate-cdn",
                "floodgate-setup",
            ]
            .iter()
            .all(|w| selects(&p["spec"]["podSelector"], &labels[*w]))
                && p["spec"]["ingress"].is_null()
                && p["spec"]["egress"].is_null()
                && p["spec"]["policyTypes"]
                    .as_sequence()
                    .is_some_and(|t| t.len() == 2)
        });
        assert!(deny_all, "{overlay}: a default-deny NetworkPolicy");
        let mut needed = vec![
            (Outside, cdn, 8000, "the public to the edge"),
            (Outside, cdn, 8001, "plain http:// to the edge's redirect"),
            (cdn, gateway, 8080, "the edge to the gateways"),
            (cdn, gateway, 8090, "the edge to the gateways' second port"),
            (cdn, gateway, 8091, "the edge to the gateways' third port"),
            (cdn, gateway, 8092, "the edge to the gateways' fourth port"),
            (cdn, booking, 8081, "the edge to the booking API"),
            (gateway, booking, 8081, "the gateways' booking route"),
        ];
        for prometheus in [monitoring, labelled] {
            needed.extend([
                (prometheus, gateway, 9080, "Prometheus"),
                (prometheus, booking, 9081, "Prometheus"),
                (prometheus, consumer, 9102, "Prometheus"),
                (prometheus, cdn, 9113, "Prometheus"),
            ]);
        }
        for pod in [gateway, booking, consumer, cdn, setup] {
            needed.push((pod, Outside, 53, "DNS"));
        }
        for (pod, port) in [
            (gateway, 6379),
            (booking, 6379),
            (booking, 9093),
            (booking, 5432),
            (consumer, 9093),
            (consumer, 5432),
            (setup, 9093),
            (setup, 5432),
            (booking, 443),
            (gateway, 443),
        ] {
            needed.push((pod, Outside, port, "a dependency"));
        }
        if overlay == "local" {
            let sandbox = Pod("floodgate-sandbox");
            needed.extend([
                (booking, sandbox, 8082, "the payment provider's API"),
                (gateway, sandbox, 8082, "the sign-in's keys"),
                (
                    sandbox,
                    cdn,
                    8000,
                    "the provider's webhook through the edge",
                ),
                (booking, Outside, 9092, "the local broker"),
                (consumer, Outside, 9092, "the local broker"),
                (setup, Outside, 9092, "the local broker"),
            ]);
        }
        for (from, to, port, why) in needed {
            let protocol_ok = allowed(&docs, from, to, port, "TCP")
                && (port != 53 || allowed(&docs, from, to, port, "UDP"));
            assert!(
                protocol_ok,
                "{overlay}: {from:?} -> {to:?}:{port} ({why}) is denied"
            );
        }
        for (from, to, port, why) in [
            (Outside, gateway, 9080, "the gateways' metrics from outside"),
            (Outside, booking, 9081, "the ops API from outside"),
            (cdn, booking, 9081, "the ops API from the edge"),
            (Outside, gateway, 8080, "the gateways around the edge"),
            (
                Outside,
                gateway,
                8091,
                "the gateways' other ports around the edge",
            ),
            (gateway, Outside, 5432, "PostgreSQL from the gateways"),
            (cdn, Outside, 6379, "Redis from the edge"),
            (setup, Outside, 6379, "Redis from the setup"),
            (Outside, setup, 9081, "anything into the setup"),
            (Outside, cdn, 9113, "the edge's metrics from outside"),
            (
                elsewhere,
                cdn,
                9113,
                "the edge's metrics from another namespace",
            ),
            (
                elsewhere,
                gateway,
                9080,
                "the gateways' metrics from another namespace",
            ),
        ] {
            assert!(
                !allowed(&docs, from, to, port, "TCP"),
                "{overlay}: {from:?} -> {to:?}:{port} ({why}) is allowed"
            );
        }
    }
}

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

/// The commands of a container list, each as one line.
fn commands(containers: &Value) -> Vec<String> {
    containers
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|c| {
            let words: Vec<&str> = c["command"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            words.join(" ")
        })
        .collect()
}

/// The schema and the topics are made once per release by the floodgate-setup Job, which no Pod
/// waits for: a booking or consumer Pod added mid-sale starts without the broker's admin API (the
/// services apply missing migrations themselves). Its template cannot change, so the release in
/// docs/deploy.md deletes it first and waits for it, it deletes itself a day after it finishes,
/// and GitOps tools are told to recreate it.
#[test]
fn the_schema_and_the_topics_are_a_job_no_pod_waits_for() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        let jobs = of_kind(&docs, "Job");
        assert_eq!(
            jobs.iter().map(|j| name(j)).collect::<Vec<_>>(),
            ["floodgate-setup"],
            "{overlay}: the Jobs"
        );
        let job = jobs[0];
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            commands(&pod["initContainers"]),
            ["floodgate-booking migrate"],
            "{overlay}: the migrations first"
        );
        assert_eq!(
            commands(&pod["containers"]),
            ["floodgate-booking topics ensure"],
            "{overlay}: then the topics"
        );
        assert_eq!(
            pod["restartPolicy"], "Never",
            "{overlay}: each try's logs kept"
        );
        let spec = &job["spec"];
        for field in [
            "backoffLimit",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
        ] {
            assert!(
                spec[field].as_u64().is_some_and(|v| v > 0),
                "{overlay}: the Job's {field}"
            );
        }
        let annotations = &job["metadata"]["annotations"];
        assert_eq!(
            annotations["argocd.argoproj.io/sync-options"], "Replace=true,Force=true",
            "{overlay}: Argo CD recreates it"
        );
        assert_eq!(
            annotations["kustomize.toolkit.fluxcd.io/force"], "enabled",
            "{overlay}: Flux recreates it"
        );
        for d in of_kind(&docs, "Deployment") {
            assert!(
                commands(&d["spec"]["template"]["spec"]["initContainers"]).is_empty(),
                "{overlay}: {} waits for something before it starts",
                name(d)
            );
        }
    }
    let walk = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    let at = |what: &str| {
        walk.find(what)
            .unwrap_or_else(|| panic!("docs/deploy.md: no `{what}`"))
    };
    let delete = at("kubectl -n floodgate delete job floodgate-setup --ignore-not-found");
    let apply =
        at("kubectl kustomize deploy/k8s/overlays/production | kubectl -n floodgate apply -f -");
    let wait = at("kubectl -n floodgate wait --for=condition=complete job/floodgate-setup");
    assert!(
        delete < apply && apply < wait,
        "docs/deploy.md: the release deletes the last Job, applies, then waits for the new one"
    );
    // The wait outlasts the Job's own deadline: it ends with the Job's verdict, not before.
    let minutes: u64 = walk[wait..]
        .lines()
        .next()
        .and_then(|l| l.split("--timeout=").nth(1))
        .and_then(|t| t.trim().strip_suffix('m'))
        .and_then(|m| m.parse().ok())
        .expect("the wait's --timeout in minutes");
    let deadline = of_kind(&rendered("production"), "Job")[0]["spec"]["activeDeadlineSeconds"]
        .as_u64()
        .unwrap();
    assert!(
        minutes * 60 > deadline,
        "docs/deploy.md waits {minutes} min for a Job that may run {deadline} s"
    );
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
