//! The tested deployment and the shipped manifests cannot drift: `deploy/compose.yaml` (which
//! the container tests run) and the local Kubernetes overlay as rendered agree on every
//! service's settings by name (and by value, wherever the value names no host), its secrets,
//! its command, its listeners and container ports, its readiness probe, its user and its
//! read-only root. Every intended difference is listed below with its reason.

use std::collections::{BTreeMap, BTreeSet};

use floodgate_tests::containers::{Compose, Service, LISTENERS, READINESS};
use floodgate_tests::manifests::rendered;

/// Settings only the manifests set, and why.
const ONLY_IN_KUBERNETES: [(&str, &str); 6] = [
    (
        "FLOODGATE_REDIS_CLUSTER_NODES_FILE",
        "Kubernetes runs on a Redis Cluster (its seeds a secret); compose on one Redis",
    ),
    (
        "FLOODGATE_KAFKA_SASL_MECHANISM",
        "the base's Kafka is SASL_SSL; compose's broker is plaintext on its own network",
    ),
    ("FLOODGATE_KAFKA_SASL_USERNAME", "as above"),
    ("FLOODGATE_KAFKA_SASL_PASSWORD_FILE", "as above"),
    ("FLOODGATE_KAFKA_SSL_CA_LOCATION", "as above"),
    (
        "FLOODGATE_INSTANCE_ID",
        "a Pod's name is stable and unique; compose's instances take a random one",
    ),
];

/// Settings only compose sets, and why.
const ONLY_IN_COMPOSE: [(&str, &str); 4] = [
    (
        "FLOODGATE_REDIS_URL",
        "one Redis (the manifests name a cluster's seeds)",
    ),
    (
        "FLOODGATE_TRUSTED_PROXIES",
        "compose's edge has a fixed address to trust besides its word; a cluster's Pods have none",
    ),
    (
        "FLOODGATE_TOKEN_KEY_ID",
        "compose's env_file carries the key id and the public keys together to both services",
    ),
    ("FLOODGATE_TOKEN_PUBLIC_KEYS", "as above"),
];

/// The edge's template: the manifests mount cdn.conf from a ConfigMap (so an edit rolls out
/// with them); compose's edge image carries the file it was built with.
const EDGE_ONLY_IN_KUBERNETES: &str = "FLOODGATE_EDGE_TEMPLATE";

/// Secrets only the manifests mount: the Redis Cluster's seeds and Kafka's password and CA.
const SECRETS_ONLY_IN_KUBERNETES: [&str; 3] =
    ["redis_cluster_nodes", "kafka_password", "kafka_ca_crt"];

/// Settings whose values name a host, a network or a client id of their deployment: equal by
/// name only.
const VALUES_OF_THEIR_OWN: [&str; 12] = [
    "FLOODGATE_KAFKA_BROKERS",
    "FLOODGATE_BOOKING_URL",
    "FLOODGATE_PAYMENT_PROVIDER_URL",
    "FLOODGATE_IDENTITY_JWKS_URL",
    "FLOODGATE_IDENTITY_AUDIENCE",
    "FLOODGATE_SANDBOX_WEBHOOK_URL",
    "FLOODGATE_EDGE_GATEWAYS",
    "FLOODGATE_EDGE_BOOKING",
    "FLOODGATE_CONSUMER_INSTANCE_ID",
    // One broker here, several there.
    "FLOODGATE_TOPIC_PARTITIONS",
    "FLOODGATE_TOPIC_REPLICATION_FACTOR",
    "FLOODGATE_TOPIC_MIN_INSYNC_REPLICAS",
];

/// Compose services and the workload and container that plays each in the manifests.
const PAIRS: [(&str, &str, &str); 7] = [
    ("gateway", "floodgate-gateway", "gateway"),
    ("booking", "floodgate-booking", "booking"),
    ("consumer", "floodgate-consumer", "consumer"),
    // Compose runs them once before the services; the manifests in the floodgate-setup Job.
    ("migrate", "floodgate-setup", "migrate"),
    ("topics", "floodgate-setup", "topics"),
    ("sandbox", "floodgate-sandbox", "sandbox"),
    ("cdn", "floodgate-cdn", "nginx"),
];

/// One container as either file describes it.
#[derive(Debug, Default, PartialEq)]
struct Described {
    command: Vec<String>,
    settings: BTreeMap<String, String>,
    /// The secrets it reads (the files its settings name, in the manifests; its `secrets:`, in
    /// compose).
    secrets: BTreeSet<String>,
    ports: BTreeSet<u16>,
    /// The readiness probe: port, and path (none: a TCP check).
    readiness: Option<(u16, Option<String>)>,
    user: String,
    read_only: bool,
    /// Its memory limit, in bytes (what a gateway's session budget follows).
    memory: Option<u64>,
}

/// A secret's name as both spell it: `database-url` and `database_url` alike.
fn secret_name(name: &str) -> String {
    name.replace(['-', '.'], "_")
}

/// A `<SETTING>_FILE` value as the secret it names (the folders differ: /run/secrets/ and
/// /run/secrets/floodgate/).
fn normalised(name: &str, value: &str) -> String {
    if name.ends_with("_FILE") {
        let file = value.rsplit('/').next().unwrap_or(value);
        return format!("secret {}", secret_name(file));
    }
    value.to_owned()
}

/// The ports of a listener setting: one address, or several, comma-separated (a gateway's four).
fn ports_of(listen: &str) -> Vec<u16> {
    listen
        .split(',')
        .map(|address| {
            address
                .rsplit(':')
                .next()
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or_else(|| panic!("{listen:?} names no port"))
        })
        .collect()
}

fn text(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        other => panic!("unexpected value {other:?}"),
    }
}

/// Container `container` of workload `workload` in the rendered manifests.
fn from_kubernetes(docs: &[serde_yaml::Value], workload: &str, container: &str) -> Described {
    let config: BTreeMap<String, String> = docs
        .iter()
        .find(|d| {
            d["kind"] == "ConfigMap"
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("floodgate-config"))
        })
        .and_then(|d| d["data"].as_mapping())
        .map(|m| m.iter().map(|(k, v)| (text(k), text(v))).collect())
        .expect("the floodgate-config ConfigMap");
    let doc = docs
        .iter()
        .find(|d| {
            d["metadata"]["name"] == workload && (d["kind"] == "Deployment" || d["kind"] == "Job")
        })
        .unwrap_or_else(|| panic!("no workload {workload}"));
    let pod = &doc["spec"]["template"]["spec"];
    let c = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod[*k].as_sequence())
        .flatten()
        .find(|c| c["name"] == container)
        .unwrap_or_else(|| panic!("{workload} has no container {container}"));
    let mut settings = BTreeMap::new();
    if c["envFrom"].as_sequence().is_some_and(|s| !s.is_empty()) {
        settings.extend(config.clone());
    }
    for env in c["env"].as_sequence().into_iter().flatten() {
        let value = if env["value"].is_null() {
            "(from the cluster)".to_owned()
        } else {
            text(&env["value"])
        };
        settings.insert(text(&env["name"]), value);
    }
    // The secrets it reads: the files its settings name, each of which it must mount.
    let files: Vec<&String> = settings
        .iter()
        .filter(|(k, _)| k.ends_with("_FILE") || k.ends_with("_LOCATION"))
        .map(|(_, v)| v)
        .collect();
    // (A `_FILE` is read by the binary itself, which stops without it; the shared Kafka CA
    // setting reaches containers that never talk to Kafka.)
    let own: Vec<&String> = settings
        .iter()
        .filter(|(k, _)| k.ends_with("_FILE"))
        .map(|(_, v)| v)
        .collect();
    for file in &own {
        assert!(
            mounted(pod, c, file),
            "{workload}/{container} names {file}, which it does not mount"
        );
    }
    let secrets = files
        .iter()
        .filter_map(|v| v.rsplit('/').next())
        .map(secret_name)
        .collect();
    let named_ports: BTreeMap<String, u16> = c["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                text(&p["name"]),
                p["containerPort"].as_u64().unwrap() as u16,
            )
        })
        .collect();
    let probe = &c["readinessProbe"];
    let port = |v: &serde_yaml::Value| match v {
        serde_yaml::Value::String(name) => named_ports[name],
        other => other.as_u64().unwrap() as u16,
    };
    let readiness = if !probe["httpGet"].is_null() {
        Some((
            port(&probe["httpGet"]["port"]),
            Some(text(&probe["httpGet"]["path"])),
        ))
    } else if !probe["tcpSocket"].is_null() {
        Some((port(&probe["tcpSocket"]["port"]), None))
    } else {
        None
    };
    let user = pod["securityContext"]["runAsUser"]
        .as_u64()
        .map(|u| {
            format!(
                "{u}:{}",
                pod["securityContext"]["runAsGroup"].as_u64().unwrap()
            )
        })
        .unwrap_or_default();
    Described {
        command: c["command"]
            .as_sequence()
            .map(|s| s.iter().map(text).collect())
            .unwrap_or_default(),
        settings,
        secrets,
        ports: named_ports.values().copied().collect(),
        readiness,
        user,
        read_only: c["securityContext"]["readOnlyRootFilesystem"] == true,
        memory: c["resources"]["limits"]["memory"]
            .as_str()
            .and_then(floodgate_tests::containers::bytes),
    }
}

/// Whether container `c` of `pod` mounts file `path`: a volume mounted at its folder holding
/// it (a Secret's listed items, or the whole Secret).
fn mounted(pod: &serde_yaml::Value, c: &serde_yaml::Value, path: &str) -> bool {
    let Some((folder, file)) = path.rsplit_once('/') else {
        return false;
    };
    c["volumeMounts"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter(|m| m["mountPath"] == folder)
        .filter_map(|m| {
            pod["volumes"]
                .as_sequence()?
                .iter()
                .find(|v| v["name"] == m["name"])
        })
        .any(|v| match v["secret"]["items"].as_sequence() {
            Some(items) => items.iter().any(|i| i["path"] == file),
            None => !v["secret"].is_null(),
        })
}

/// Compose service `name`.
fn from_compose(compose: &Compose, name: &str) -> Described {
    let s: Service = compose.service(name);
    let mut settings = s.environment.clone();
    if s.env_file.is_some() {
        // What compose-secrets.sh writes to token.env.
        for key in ["FLOODGATE_TOKEN_KEY_ID", "FLOODGATE_TOKEN_PUBLIC_KEYS"] {
            settings.insert(key.to_owned(), "(from token.env)".to_owned());
        }
    }
    let listen = |setting: &str| ports_of(&settings[setting]);
    let ports = LISTENERS
        .iter()
        .filter(|(service, _)| *service == name)
        .flat_map(|(_, l)| l.iter().flat_map(|setting| listen(setting)))
        .collect();
    // Probed on the first of a listener's addresses.
    let readiness = READINESS
        .iter()
        .find(|(service, _, _)| *service == name)
        .map(|(_, setting, path)| (listen(setting)[0], path.map(str::to_owned)));
    Described {
        command: s.command.clone(),
        settings,
        secrets: s.secrets.iter().map(|n| secret_name(n)).collect(),
        ports,
        readiness,
        // Every Floodgate image and the edge's run as this user (their Dockerfiles).
        user: "10001:10001".into(),
        read_only: s.read_only,
        memory: s.mem_limit,
    }
}

#[test]
fn compose_and_the_kubernetes_manifests_agree() {
    let compose = Compose::load();
    let docs = rendered("local");
    let only_k8s: BTreeSet<&str> = ONLY_IN_KUBERNETES
        .iter()
        .map(|(n, _)| *n)
        .chain([EDGE_ONLY_IN_KUBERNETES])
        .collect();
    let only_compose: BTreeSet<&str> = ONLY_IN_COMPOSE.iter().map(|(n, _)| *n).collect();
    for (service, workload, container) in PAIRS {
        let mut c = from_compose(&compose, service);
        let mut k = from_kubernetes(&docs, workload, container);
        // The edge's image fills in cdn.conf itself: the manifests give it no command either.
        if service == "cdn" {
            assert!(c.command.is_empty() && k.command.is_empty(), "{service}");
        }
        for (name, value) in &c.settings {
            if only_compose.contains(name.as_str()) {
                continue;
            }
            let theirs = k.settings.get(name).unwrap_or_else(|| {
                panic!("{service}: {name} is set in compose and not in {workload}")
            });
            if !VALUES_OF_THEIR_OWN.contains(&name.as_str()) {
                assert_eq!(
                    normalised(name, value),
                    normalised(name, theirs),
                    "{service}: {name} differs"
                );
            }
        }
        for name in k.settings.keys() {
            assert!(
                c.settings.contains_key(name) || only_k8s.contains(name.as_str()),
                "{service}: {name} is set in {workload} and not in compose"
            );
        }
        k.secrets
            .retain(|s| !SECRETS_ONLY_IN_KUBERNETES.contains(&s.as_str()));
        assert_eq!(c.secrets, k.secrets, "{service}: the secrets mounted");
        assert_eq!(c.command, k.command, "{service}: the command");
        assert_eq!(c.ports, k.ports, "{service}: the listeners");
        assert_eq!(c.readiness, k.readiness, "{service}: the readiness probe");
        assert_eq!(c.user, k.user, "{service}: the user");
        assert!(
            c.read_only && k.read_only,
            "{service}: a read-only root in both"
        );
        // Compose runs its one-off jobs before the services, unlimited; the manifests' Job
        // runs them with a small limit of its own (256 MiB, in base/setup.yaml).
        if !matches!(service, "migrate" | "topics") {
            assert_eq!(c.memory, k.memory, "{service}: the memory limit");
        }
        c.settings.clear();
        k.settings.clear();
    }
}

/// Production runs the same containers as the tested deployment: the same commands,
/// listeners, readiness probes, user and read-only root (its settings are its own: TLS, the
/// operator's services).
#[test]
fn production_runs_the_same_containers_as_the_tested_deployment() {
    let compose = Compose::load();
    let docs = rendered("production");
    for (service, workload, container) in PAIRS.iter().filter(|(s, _, _)| *s != "sandbox") {
        let c = from_compose(&compose, service);
        let k = from_kubernetes(&docs, workload, container);
        assert_eq!(c.command, k.command, "{service}: the command");
        assert_eq!(c.ports, k.ports, "{service}: the listeners");
        assert_eq!(c.readiness, k.readiness, "{service}: the readiness probe");
        assert_eq!(c.user, k.user, "{service}: the user");
        assert!(k.read_only, "{service}: a read-only root");
    }
}

/// Within each deployment, the sign-in and the checkout fit together: every service expects
/// tokens for the audience the stand-in signs them for, from the issuer it signs as (its public
/// URL), and the page may send a payer to its checkout. A mismatch here is a sign-in that fails
/// on the first day (the audience and the issuer are values of their own in the comparison
/// between deployments, so this holds each one to itself).
#[test]
fn the_sign_in_and_the_checkout_fit_together_in_each_deployment() {
    let compose = Compose::load();
    let docs = rendered("local");
    for deployment in ["compose", "local"] {
        let describe = |service: &str| {
            let (_, workload, container) = PAIRS.iter().find(|(s, _, _)| *s == service).unwrap();
            if deployment == "compose" {
                from_compose(&compose, service)
            } else {
                from_kubernetes(&docs, workload, container)
            }
        };
        let sandbox = describe("sandbox").settings;
        let public = &sandbox["FLOODGATE_SANDBOX_PUBLIC_URL"];
        assert!(
            !sandbox["FLOODGATE_SANDBOX_SIGNIN_RETURN_ORIGINS"].is_empty(),
            "{deployment}: the stand-in returns buyers to no page"
        );
        for service in ["gateway", "booking"] {
            let settings = describe(service).settings;
            let setting = |name: &str| {
                settings
                    .get(name)
                    .unwrap_or_else(|| panic!("{deployment} {service}: {name} is not set"))
            };
            assert_eq!(
                setting("FLOODGATE_IDENTITY_AUDIENCE"),
                &sandbox["FLOODGATE_IDENTITY_AUDIENCE"],
                "{deployment} {service}: the audience of the stand-in's tokens"
            );
            assert_eq!(
                setting("FLOODGATE_IDENTITY_ISSUER"),
                public,
                "{deployment} {service}: the stand-in signs as its public URL"
            );
            assert!(
                setting("FLOODGATE_CHECKOUT_ORIGINS")
                    .split(',')
                    .any(|o| o.trim() == public.trim_end_matches('/')),
                "{deployment} {service}: the page may not open the stand-in's checkout"
            );
        }
    }
}
