//! The network policy, read as Kubernetes would enforce it: every flow Floodgate needs allowed,
//! everything else denied.

use std::collections::BTreeMap;

use floodgate_tests::manifests::{name, of_kind, rendered, workloads, OVERLAYS};
use serde_yaml::Value;

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
