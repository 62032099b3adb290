//! The deployment files (issue 16): `deploy/check-deploy.sh` lints the Dockerfile, checks the
//! compose file against the Compose specification and validates every rendered Kubernetes
//! overlay strictly. Here it is shown to pass on this tree and to fail on each kind of mistake it
//! exists to catch, planted in a copy; and the compose stack's secret maker makes secrets the
//! services accept. Beside them, what the binaries take from the host they run on: the
//! open-files limit and the accept queue.

use std::path::{Path, PathBuf};
use std::process::Command;

use floodgate_tests::{binary, run_to_end, unique};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A copy of the deployment files in a fresh folder (removed when dropped).
struct Copy(PathBuf);

impl Copy {
    fn new() -> Self {
        let root = std::env::temp_dir().join(unique("deploy-"));
        std::fs::create_dir_all(root.join("deploy")).unwrap();
        for (from, to) in [
            ("Dockerfile", "."),
            (".hadolint.yaml", "."),
            ("deploy/compose.yaml", "deploy"),
            ("deploy/k8s", "deploy"),
            ("deploy/nginx", "deploy"),
        ] {
            let status = Command::new("cp")
                .arg("-R")
                .arg(repo().join(from))
                .arg(root.join(to))
                .status()
                .unwrap();
            assert!(status.success());
        }
        Self(root)
    }

    /// Replaces the first `old` in `file` with `new`.
    fn plant(&self, file: &str, old: &str, new: &str) {
        let path = self.0.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(old), "{old:?} is not in {file}");
        std::fs::write(&path, text.replacen(old, new, 1)).unwrap();
    }

    fn check(&self) -> (i32, String) {
        check(&self.0)
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check(root: &Path) -> (i32, String) {
    let mut command = Command::new(repo().join("deploy/check-deploy.sh"));
    command.arg(root);
    run_to_end(&mut command)
}

#[test]
fn the_deployment_files_pass_their_checks() {
    let (code, said) = check(&repo());
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("all checks pass"), "{said}");
    // Both overlays were rendered and validated, the operator resource set aside by name.
    assert!(said.contains("local rendered and validated"), "{said}");
    assert!(said.contains("production rendered and validated"), "{said}");
    assert!(
        said.contains("ServiceMonitor floodgate: an operator resource"),
        "{said}"
    );
}

/// What the check says about a copy with `old` replaced by `new` in `file`, which it must fail.
fn refused(file: &str, old: &str, new: &str) -> String {
    let copy = Copy::new();
    copy.plant(file, old, new);
    let (code, said) = copy.check();
    assert_ne!(code, 0, "{new:?} in {file} passed: {said}");
    said
}

#[test]
fn a_manifest_with_an_unknown_field_fails_the_check() {
    assert_eq!(Copy::new().check().0, 0, "an untouched copy passes");
    // A misspelt field, the mistake a strict schema exists to catch: Kubernetes would drop it
    // without a word and the Pod would run without the setting.
    let said = refused(
        "deploy/k8s/base/consumer.yaml",
        "        image: floodgate\n",
        "        image: floodgate\n        imagePullPolcy: Always\n",
    );
    assert!(said.contains("'imagePullPolcy' was unexpected"), "{said}");
    assert!(said.contains("floodgate-consumer"), "{said}");
}

#[test]
fn a_resource_without_a_schema_fails_unless_it_is_a_listed_operator_resource() {
    let said = refused(
        "deploy/k8s/overlays/production/monitoring/service-monitor.yaml",
        "kind: ServiceMonitor",
        "kind: ServiceMonitr",
    );
    assert!(said.contains("kind with no schema"), "{said}");
}

#[test]
fn the_dockerfile_and_the_compose_file_are_checked_too() {
    let said = refused(
        "Dockerfile",
        "FROM node:20-bookworm-slim AS page",
        "FROM node:latest AS page",
    );
    assert!(said.contains("DL3007"), "hadolint names its rule: {said}");
    // The edge's image too.
    let said = refused(
        "deploy/nginx/Dockerfile",
        "apt-get install -y --no-install-recommends nginx-light",
        "apt-get install -y nginx-light",
    );
    assert!(said.contains("DL3015"), "hadolint names its rule: {said}");
    let said = refused("deploy/compose.yaml", "    ulimits:\n", "    ulimit:\n");
    assert!(said.contains("ulimit"), "{said}");
}

#[test]
fn the_compose_secrets_are_made_once_readable_by_the_containers_and_the_key_pair_matches() {
    let dir = std::env::temp_dir().join(unique("compose-secrets-"));
    let run = || {
        let mut command = Command::new(repo().join("deploy/compose-secrets.sh"));
        command.env("SECRETS_DIR", &dir).env(
            "FLOODGATE_KEYGEN",
            format!("{} keygen", binary("floodgate-gateway").display()),
        );
        run_to_end(&mut command)
    };
    let (code, said) = run();
    assert_eq!(code, 0, "{said}");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let seed = read("token_signing_key");
    let env = read("token.env");
    let kid = env
        .lines()
        .find_map(|l| l.strip_prefix("FLOODGATE_TOKEN_KEY_ID="))
        .expect("the key id");
    let signer = floodgate_protocol::token::TokenSigner::from_base64(kid, &seed)
        .expect("the signing key is a seed the gateway takes");
    assert!(
        env.contains(&format!(
            "FLOODGATE_TOKEN_PUBLIC_KEYS={kid}={}",
            signer.public_base64()
        )),
        "the public key is the signing key's: {env}"
    );
    for secret in ["ops_token", "webhook_secret", "payment_api_key"] {
        let value = read(secret);
        floodgate_platform::secrets::check_secret(secret, &value.clone().into())
            .expect("long enough for the service");
    }
    let password = read("postgres_password");
    assert!(read("database_url").contains(&format!(":{password}@postgres:5432/")));
    // The containers run as uid 10001, nobody on the host, and see each file bind-mounted
    // alone: the files must be readable by anyone, and the folder they sit in is what keeps the
    // host's other users out.
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode(&dir) & 0o077, 0, "the folder is its owner's only");
    for secret in [
        "token_signing_key",
        "ops_token",
        "audit_key",
        "reservation_key",
        "edge_key",
        "database_url",
    ] {
        assert_eq!(
            mode(&dir.join(secret)) & 0o004,
            0o004,
            "{secret} readable by the containers' user"
        );
    }
    // Run again: nothing changes.
    let (code, said) = run();
    assert_eq!(code, 0, "{said}");
    assert_eq!(read("token_signing_key"), seed);
    assert_eq!(read("token.env"), env);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The soft and hard open-files limits of process `pid`.
fn open_files_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("the open-files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_owned(), fields[4].to_owned())
}

/// `command` run with a soft open-files limit of 256 (its hard limit unchanged), as a container
/// runtime starts a process: only the program itself can raise it.
fn with_low_soft_limit(command: &Command) -> Command {
    let mut low = Command::new("prlimit");
    low.arg("--nofile=256:")
        .arg("--")
        .arg(command.get_program());
    low.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => low.env(key, value),
            None => low.env_remove(key),
        };
    }
    low
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_booking_service_and_the_consumer_raise_their_open_files_limit() {
    let (url, db) = floodgate_tests::fresh_database().await;
    let app = floodgate_tests::TestApp::spawn(db).await;
    let env = [
        ("FLOODGATE_OPS_TOKEN", floodgate_tests::secret("ops_")),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            floodgate_tests::secret("whsec_"),
        ),
    ];
    let (booking, admin, _) = floodgate_tests::services::booking_serve(&app, &url, &env);
    let mut booking =
        floodgate_tests::services::start_service(&mut with_low_soft_limit(&booking), &admin).await;
    let consumer_admin = floodgate_tests::gateways::free_port();
    let mut consumer = Command::new(binary("floodgate-consumer"));
    consumer
        .env("FLOODGATE_DATABASE_URL", &url)
        .env("FLOODGATE_KAFKA_BROKERS", floodgate_tests::kafka_brokers())
        .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
        .env("FLOODGATE_CONSUMER_GROUP", unique("limits-"))
        .env(
            "FLOODGATE_CONSUMER_METRICS_LISTEN",
            consumer_admin.to_string(),
        )
        .env("RUST_LOG", "error");
    let mut consumer = floodgate_tests::services::start_service(
        &mut with_low_soft_limit(&consumer),
        &format!("http://{consumer_admin}"),
    )
    .await;
    for child in [&mut booking, &mut consumer] {
        let (soft, hard) = open_files_limits(child.id());
        assert_eq!(soft, hard, "the soft limit is raised to the hard one");
        assert_ne!(soft, "256");
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The accept queue the kernel gave the listener on `port` (the Send-Q `ss` shows for it).
fn accept_queue(port: u16) -> u32 {
    let out = Command::new("ss")
        .args(["-Hltn", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2; deploy/stack.sh tools installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no listener on {port}: {text}"));
    // State, Recv-Q (connections waiting now), Send-Q (the queue's size), local, peer.
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// A flash crowd's connections wait in the listener's accept queue; one that is full drops the
/// next SYNs, and their clients' kernels resend them only seconds later. Every service asks for
/// the most the kernel allows (`net.core.somaxconn`), not tokio's default of 1,024.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_takes_the_accept_queue_the_kernel_allows() {
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let allowed = somaxconn.min(floodgate_platform::runtime::LISTEN_BACKLOG);
    let (url, db) = floodgate_tests::fresh_database().await;
    let app = floodgate_tests::TestApp::spawn(db).await;
    let gateway = floodgate_tests::gateways::GatewayProcess::spawn(
        &app,
        &unique("backlog-"),
        &floodgate_tests::gateways::GatewayTimings::default(),
    )
    .await;
    let env = [
        ("FLOODGATE_OPS_TOKEN", floodgate_tests::secret("ops_")),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            floodgate_tests::secret("whsec_"),
        ),
    ];
    let (mut booking, admin, api) = floodgate_tests::services::booking_serve(&app, &url, &env);
    let _booking = floodgate_tests::services::Stopped(
        floodgate_tests::services::start_service(&mut booking, &admin).await,
    );
    let port = |url: &str| -> u16 { url.rsplit(':').next().unwrap().parse().unwrap() };
    for (listener, port) in [
        ("the gateway's public listener", gateway.addr.port()),
        ("the gateway's admin listener", gateway.admin.port()),
        ("the booking API", port(&api)),
        ("the booking admin listener", port(&admin)),
    ] {
        assert_eq!(
            accept_queue(port),
            allowed,
            "{listener} (net.core.somaxconn is {somaxconn})"
        );
    }
}

/// The compose file and every Kubernetes overlay as rendered: `(name, text)` of each.
fn deployments() -> Vec<(String, String)> {
    let compose = std::fs::read_to_string(repo().join("deploy/compose.yaml")).unwrap();
    let mut rendered = vec![("compose".to_owned(), compose)];
    for overlay in ["local", "production"] {
        let output = Command::new(floodgate_tests::tool("kubernetes-client/usr/bin/kubectl"))
            .arg("kustomize")
            .arg(repo().join("deploy/k8s/overlays").join(overlay))
            .output()
            .expect("kubectl (deploy/stack.sh tools installs it)");
        assert!(output.status.success(), "{overlay} renders");
        rendered.push((overlay.into(), String::from_utf8(output.stdout).unwrap()));
    }
    rendered
}

/// The value of `name` in a rendered overlay's `floodgate-config` ConfigMap or in the compose
/// file's settings (`NAME: value` or `- NAME=value`), if set.
fn setting(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("- ");
        let rest = line.strip_prefix(name)?;
        let value = rest.strip_prefix(": ").or_else(|| rest.strip_prefix('='))?;
        Some(value.trim().trim_matches('"').to_owned())
    })
}

/// Behind the shipped edge every connection comes from an edge: a deployment whose services do
/// not take the edge's forwarded address counts every client as the edge's, and the per-address
/// limits refuse everyone at once. The edge's word (`X-Floodgate-Edge`, from the key it shares
/// with the services) vouches for it wherever its Pods' addresses are: every deployment gives the
/// edge, the gateways and the booking service that one key, and no overlay trusts a guessed range
/// of Pod addresses (10.0.0.0/8 is not every cluster's Pod network: EKS gives Pods their VPC's
/// addresses, Calico's default is 192.168.0.0/16; and a range wider than the edges lets whatever
/// else runs there name any client). Compose trusts its edge's fixed address besides
/// (`compose_trusts_its_edge_and_nothing_else`). docs/deploy.md's settings table still explains
/// the setting, for proxies of the operator's own.
#[test]
fn every_deployment_takes_its_edges_word_for_client_addresses() {
    for (name, text) in &deployments() {
        assert!(
            text.matches("FLOODGATE_EDGE_KEY_FILE").count() >= 3,
            "{name}: the edge, the gateways and the booking service each read the edge's key"
        );
        if name != "compose" {
            assert_eq!(
                setting(text, "FLOODGATE_TRUSTED_PROXIES"),
                None,
                "{name} trusts a guessed range of Pod addresses"
            );
        }
    }
    let deploy = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    assert!(
        deploy
            .lines()
            .any(|l| l.starts_with("| `FLOODGATE_TRUSTED_PROXIES`")),
        "docs/deploy.md's settings table names FLOODGATE_TRUSTED_PROXIES"
    );
}

/// The page sends a payer only to a checkout origin the gateway names: a deployment that names
/// none leaves every buyer unable to pay. Compose and every overlay name theirs.
#[test]
fn every_deployment_names_its_checkout_origins() {
    for (name, text) in deployments() {
        let origins = setting(&text, "FLOODGATE_CHECKOUT_ORIGINS")
            .unwrap_or_else(|| panic!("{name} sets no FLOODGATE_CHECKOUT_ORIGINS"));
        for origin in origins.split(',') {
            let url = reqwest::Url::parse(origin.trim())
                .unwrap_or_else(|e| panic!("{name}: {origin:?}: {e}"));
            assert!(
                url.path() == "/" && url.host().is_some(),
                "{name}: {origin:?}"
            );
        }
    }
}

/// Whether `.dockerignore` keeps `path` out of the image's build context: a line naming it or a
/// folder above it (the only form the file uses besides `**/name`).
fn kept_out_of_the_image(path: &str) -> bool {
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .any(|pattern| {
            let pattern = pattern.trim_end_matches('/');
            match pattern.strip_prefix("**/") {
                Some(name) => path.split('/').any(|part| match name.strip_prefix('*') {
                    Some(suffix) => part.ends_with(suffix),
                    None => part == name,
                }),
                None => path == pattern || path.starts_with(&format!("{pattern}/")),
            }
        })
}

/// The build context carries no secret and no sale's published data: the compose secrets
/// (deploy/secrets/) and the files `sale publish` writes (static/data/) would otherwise be
/// copied into every image built from a working checkout.
#[test]
fn the_images_build_context_leaves_secrets_and_published_data_out() {
    for path in [
        "deploy/secrets/token_signing_key",
        "deploy/secrets/database_url",
        "static/data/sales/demo.json",
        "target/release/floodgate-gateway",
        // What docs/deploy.md's steps leave in a checkout: the admission key pair, CA files.
        "token.env",
        "postgres-ca.crt",
        "deploy/tls/server.key",
    ] {
        assert!(kept_out_of_the_image(path), "{path} goes into the image");
    }
    for path in ["Cargo.toml", "static/app.js", "deploy/nginx/cdn.conf"] {
        assert!(!kept_out_of_the_image(path), "{path} is needed");
    }
}

/// Every container of every overlay names a tagged image (`name:tag`, never `latest` or no tag,
/// which Kubernetes pulls `Always` and which a locally loaded image cannot satisfy).
#[test]
fn every_overlays_images_are_tagged() {
    for (name, text) in deployments().into_iter().filter(|(n, _)| n != "compose") {
        let images: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().trim_start_matches("- ").strip_prefix("image: "))
            .collect();
        assert!(!images.is_empty(), "{name} runs no image");
        for image in images {
            let tag = image.rsplit_once('/').map_or(image, |(_, last)| last);
            let tag = tag.split_once(':').map(|(_, tag)| tag);
            assert!(
                tag.is_some_and(|t| !t.is_empty() && t != "latest"),
                "{name}: image {image} has no tag of its own"
            );
        }
    }
}

/// The Services of a rendered overlay: `(name, port names)` of each.
fn services(text: &str) -> Vec<(String, Vec<String>)> {
    text.split("\n---")
        .filter(|doc| doc.lines().any(|l| l == "kind: Service"))
        .map(|doc| {
            let name = doc
                .lines()
                .skip_while(|l| *l != "metadata:")
                .find_map(|l| l.trim().strip_prefix("name: "))
                .unwrap_or_default()
                .to_owned();
            let ports = doc
                .lines()
                .skip_while(|l| l.trim() != "ports:")
                .filter_map(|l| l.trim().strip_prefix("- name: "))
                .map(str::to_owned)
                .collect();
            (name, ports)
        })
        .collect()
}

/// Metrics and the ops API are for operators: no Service that carries public traffic also
/// carries an admin port (whatever routes the public Service could reach them).
#[test]
fn no_public_service_carries_an_admin_port() {
    for (overlay, text) in deployments().into_iter().filter(|(n, _)| n != "compose") {
        let services = services(&text);
        assert!(
            services
                .iter()
                .any(|(_, ports)| ports.iter().any(|p| p == "admin")),
            "{overlay}: admin ports have Services of their own"
        );
        for (service, ports) in services {
            let admin = ports.iter().any(|p| p == "admin");
            assert!(
                !admin || ports.len() == 1,
                "{overlay}: {service} carries {ports:?}"
            );
        }
    }
}

/// The number after `directive` in the edge's configuration (its first use).
fn nginx_number(conf: &str, directive: &str) -> Option<u64> {
    conf.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(directive)?.strip_prefix(' '))
        .and_then(|v| v.trim_end_matches(';').trim().parse().ok())
}

/// The shipped edge is sized for the crowd `docs/capacity.md` plans for: a worker per core, each
/// with room for hundreds of thousands of sockets (a proxied WebSocket holds two), and a cap
/// per client address on connections and on request rate, so one stranger cannot take the
/// edge's sockets from everyone else.
#[test]
fn the_edge_is_sized_for_the_rush_and_limits_each_client() {
    let conf = std::fs::read_to_string(repo().join("deploy/nginx/cdn.conf")).unwrap();
    assert!(
        conf.lines().any(|l| l.trim() == "worker_processes auto;"),
        "a worker per core"
    );
    let connections = nginx_number(&conf, "worker_connections").expect("worker_connections");
    let files = nginx_number(&conf, "worker_rlimit_nofile").expect("worker_rlimit_nofile");
    assert!(connections >= 100_000, "{connections} connections a worker");
    assert!(
        files >= 2 * connections,
        "{files} files for {connections} connections"
    );
    // Per address for what carries nothing of a person's own (the address is the key of
    // `$floodgate_ws_anonymous` then), every request of an address that the edge cannot prove
    // under a ceiling (the address is the key of `$floodgate_unproven` then), every socket of an
    // address that names no person, and what the cache cannot answer.
    for zone in [
        "limit_conn_zone $floodgate_ws_anonymous",
        "limit_req_zone $floodgate_ws_anonymous",
        "limit_conn_zone $floodgate_ws_unnamed",
        "limit_req_zone $floodgate_unproven",
        "limit_req_zone $floodgate_client zone=floodgate_pages",
        "\"\" $floodgate_client;",
        "default $floodgate_client;",
        // A client is an IPv4 address, or an IPv6 address's /64.
        "map $binary_remote_addr $floodgate_client {",
    ] {
        assert!(conf.contains(zone), "{zone}");
    }
    let ws = conf
        .split("location = /ws {")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("the /ws location");
    assert!(
        ws.contains("limit_conn ") && ws.contains("limit_req "),
        "{ws}"
    );
}

/// The rendered resources of `kind` in `text` that name `target` (in a selector or a scale
/// target).
fn resources_naming<'a>(text: &'a str, kind: &str, target: &str) -> Vec<&'a str> {
    let kind = format!("kind: {kind}");
    text.split("\n---")
        .filter(|doc| doc.lines().any(|l| l == kind))
        .filter(|doc| doc.contains(target))
        .collect()
}

/// The edge holds every client's socket: a node drain or an upgrade may take only one edge Pod
/// at a time, and the edge grows with the crowd as the gateways do (from two in production).
#[test]
fn the_edge_has_a_disruption_budget_and_an_autoscaler() {
    for (overlay, text) in deployments().into_iter().filter(|(n, _)| n != "compose") {
        let budgets = resources_naming(&text, "PodDisruptionBudget", "floodgate-cdn");
        assert!(
            budgets.iter().any(|b| b.contains("maxUnavailable: 1")),
            "{overlay}: the edge's PodDisruptionBudget"
        );
        let scalers = resources_naming(&text, "HorizontalPodAutoscaler", "floodgate-cdn");
        // A laptop's cluster runs one of each; production keeps two edges at least (its
        // scale.yaml sets more).
        let least = if overlay == "local" { 1 } else { 2 };
        let floor = scalers.iter().find_map(|s| {
            s.lines()
                .find_map(|l| l.trim().strip_prefix("minReplicas: "))
                .and_then(|n| n.parse::<u32>().ok())
        });
        assert!(
            floor.is_some_and(|n| n >= least),
            "{overlay}: the edge's autoscaler keeps {floor:?}, at least {least} wanted"
        );
        // The autoscaler owns the count: a Deployment naming one would set it back at every
        // apply, closing the sockets of every edge it removed.
        let edges = resources_naming(&text, "Deployment", "app.kubernetes.io/name: floodgate-cdn");
        assert!(
            !edges.is_empty() && edges.iter().all(|d| !d.contains("\n  replicas:")),
            "{overlay}: the edge's Deployment names no replicas"
        );
    }
}

/// Compose's gateways trust the edge's own fixed address and nothing else: a browser's
/// connection to a published port arrives from the compose network's gateway address, and a
/// trusted range holding it would let any client name itself in X-Forwarded-For.
#[test]
fn compose_trusts_its_edge_and_nothing_else() {
    let compose = floodgate_tests::containers::Compose::load();
    let edge = compose
        .service("cdn")
        .ipv4_address
        .expect("the edge has a fixed address on compose's network");
    for service in ["gateway", "booking"] {
        assert_eq!(
            compose.service(service).environment["FLOODGATE_TRUSTED_PROXIES"],
            format!("{edge}/32"),
            "{service}"
        );
    }
}
