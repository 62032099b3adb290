//! The edge's source ports (issue 49): an edge opens one connection to the gateways for each
//! waiting client, and every connection to one (address, port) takes a port of the range the
//! kernel gives out (`net.ipv4.ip_local_port_range`), so one destination caps an edge at that
//! range's size, whatever its workers could hold. The shipped edge names the gateways' Service
//! on as many ports as it has; here, in a network namespace whose range is narrowed to 1,000
//! ports, an edge with as many destinations as the shipped one passes on 2,500 waiting clients.
//! With the three entries of one Service port that shipped before, it passed 1,000 (the whole
//! range) and answered the rest 503.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use floodgate_tests::edge::address_list;
use floodgate_tests::manifests::{name, of_kind, rendered, settings};
use floodgate_tests::netns::{Netns, UnixForward};
use floodgate_tests::services::{Stopped, Terminated};
use floodgate_tests::{binary, eventually, redis_addr, unique, SaleSpec, TestApp, TestOptions};

/// The namespace's source ports: 1,000.
const RANGE: &str = "40000 40999";
/// More waiting clients than one destination has source ports.
const CLIENTS: u64 = 2_500;

/// The distinct (Service, port) destinations the production edge names for the gateways.
fn shipped_destinations() -> usize {
    let docs = rendered("production");
    let edge = of_kind(&docs, "Deployment")
        .into_iter()
        .find(|d| name(d) == "floodgate-cdn")
        .unwrap();
    let env = settings(&docs, &edge["spec"]["template"]["spec"]["containers"][0]);
    let named: BTreeSet<String> = env["FLOODGATE_EDGE_GATEWAYS"]
        .split(',')
        .map(|g| g.trim().to_owned())
        .collect();
    named.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_edge_passes_on_more_clients_than_a_destination_has_source_ports() {
    let destinations = shipped_destinations();
    let app = TestApp::spawn_with(
        floodgate_tests::fresh_database().await.1,
        TestOptions {
            without_sign_in: true,
            ..TestOptions::default()
        },
    )
    .await;
    let sale = unique("ports-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(3_600),
            ..SaleSpec::default()
        },
    )
    .await;

    let ns = Netns::new("fg-");
    ns.sysctl("net.ipv4.ip_local_port_range", RANGE);
    let dir = std::env::temp_dir().join(unique("floodgate-ports-"));
    std::fs::create_dir_all(&dir).unwrap();
    let redis = UnixForward::to(redis_addr(), &dir);

    // One gateway inside, listening on as many ports as the shipped edge has destinations.
    let ports: Vec<SocketAddr> = (0..destinations)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 18_080 + i as u16)))
        .collect();
    let _gateway = Stopped(
        ns.command(binary("floodgate-gateway"))
            .arg("serve")
            .env("FLOODGATE_GATEWAY_LISTEN", address_list(&ports))
            .env("FLOODGATE_GATEWAY_ADMIN_LISTEN", "127.0.0.1:19080")
            .env(
                "FLOODGATE_REDIS_URL",
                format!("unix://{}", redis.path.display()),
            )
            .env("FLOODGATE_REDIS_PREFIX", app.keys.prefix())
            .env("FLOODGATE_TOKEN_KEY_ID", app.signer.kid())
            .env("FLOODGATE_TOKEN_SIGNING_KEY", app.signer.seed_base64())
            .env("FLOODGATE_EDGE_KEY", floodgate_tests::edge_key())
            // Every client arrives through the edge, from the addresses it names.
            .env("FLOODGATE_TRUSTED_PROXIES", "127.0.0.1/32")
            .env("FLOODGATE_MAX_CONNECTIONS_PER_IP", "100000")
            .env("FLOODGATE_JOINS_PER_SEC_PER_IP", "100000")
            .env("FLOODGATE_DRAIN_DELAY_MS", "0")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("the gateway starts"),
    );
    for port in &ports {
        eventually("the gateway listens", Duration::from_secs(20), async || {
            ns.listens(*port)
        })
        .await;
    }

    // The edge inside, as its image runs it, with one worker: one process passes them all.
    let edge: SocketAddr = "127.0.0.1:18000".parse().unwrap();
    let template = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nginx");
    let log = dir.join("edge.log");
    let _edge = Terminated(
        ns.command(template.join("edge.sh"))
            .env("PATH", "/usr/sbin:/usr/bin:/bin")
            .env("FLOODGATE_EDGE_LISTEN", edge.to_string())
            .env("FLOODGATE_EDGE_METRICS_LISTEN", "127.0.0.1:19113")
            .env("FLOODGATE_EDGE_REDIRECT_LISTEN", "127.0.0.1:18001")
            .env("FLOODGATE_EDGE_GATEWAYS", address_list(&ports))
            .env("FLOODGATE_EDGE_BOOKING", "127.0.0.1:18081")
            .env("FLOODGATE_EDGE_WORKERS", "1")
            .env("FLOODGATE_EDGE_PREFIX", dir.join("edge"))
            .env("FLOODGATE_EDGE_TEMPLATE", template.join("cdn.conf"))
            .env("FLOODGATE_EDGE_KEY", floodgate_tests::edge_key())
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the edge starts"),
    );
    eventually("the edge listens", Duration::from_secs(20), async || {
        ns.listens(edge)
    })
    .await;

    // The crowd, inside too, from 32 addresses (under the edge's sockets per address), held
    // while the edge's processes are read (BENCHMARKS.md, "The edge's ports").
    let from: Vec<String> = (1..=32).map(|i| format!("127.0.4.{i}")).collect();
    let report = dir.join("idle.json");
    // A few first, so that the worker has taken connections before the first reading.
    let warmed = ns
        .command(binary("floodgate-loadgen"))
        .args(["idle", "--gateway", &edge.to_string(), "--sale", &sale])
        .args(["--connections", "8", "--hold-secs", "0"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("the load generator runs");
    assert!(warmed.status.success(), "{warmed:?}");
    let before = edge_usage(_edge.0.id());
    let crowd = ns
        .command(binary("floodgate-loadgen"))
        .args(["idle", "--gateway", &edge.to_string(), "--sale", &sale])
        .args(["--connections", &CLIENTS.to_string(), "--hold-secs", "3"])
        .args(["--from", &from.join(",")])
        .arg("--json")
        .arg(&report)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the load generator runs");
    // The report is written once every client has its ticket and the load generator has
    // settled, while it still holds them all.
    eventually(
        "the crowd has waited",
        Duration::from_secs(120),
        async || report.exists(),
    )
    .await;
    let (rss, cpu) = edge_usage(_edge.0.id());
    let waited = crowd.wait_with_output().expect("the load generator ends");
    let said = String::from_utf8_lossy(&waited.stdout).into_owned()
        + &String::from_utf8_lossy(&waited.stderr);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap_or_default()).unwrap_or_default();
    let edge_said = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        report["open"].as_u64(),
        Some(CLIENTS),
        "{destinations} destinations of {RANGE}: {said}\nthe edge: {}",
        edge_said
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The edge's cost of a waiting client, for BENCHMARKS.md (nothing asserted of it: a
    // measure, not a target).
    let ticks = 100.0; // USER_HZ on Linux
    println!(
        "edge: {CLIENTS} more waiting through one worker; resident memory {} -> {} KiB, {:.2} KB a \
         client; CPU {:.0} us a client (its join and its two sockets)",
        before.0,
        rss,
        (rss.saturating_sub(before.0)) as f64 * 1.024 / CLIENTS as f64,
        (cpu.saturating_sub(before.1)) as f64 / ticks * 1e6 / CLIENTS as f64,
    );
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The edge's processes (its master, `pid`, and its workers): resident memory (KiB) and CPU
/// time (clock ticks) added up, read from /proc, which shows every namespace's processes.
fn edge_usage(pid: u32) -> (u64, u64) {
    let workers: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p: &u32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    Some(
                        s.rsplit_once(") ")?
                            .1
                            .split(' ')
                            .nth(1)?
                            .parse::<u32>()
                            .ok()?
                            == pid,
                    )
                })
                .unwrap_or(false)
        })
        .collect();
    let mut rss = 0;
    let mut cpu = 0;
    for p in std::iter::once(pid).chain(workers) {
        let status = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
        rss += status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        if let Some((_, fields)) = stat.rsplit_once(") ") {
            let fields: Vec<&str> = fields.split(' ').collect();
            // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command's name.
            cpu += fields
                .get(11)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                + fields
                    .get(12)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
        }
    }
    (rss, cpu)
}

/// A gateway that has gone (its Pod's address no longer answering: SYNs dropped, no reset) is
/// given up on within the edge's connect timeout and the join tried on the next: nginx's own
/// 60 s would hold every join routed to it that long. Here the first gateway named is a socket
/// whose accept queue is full (the kernel drops the SYNs), and each of four joins through the
/// edge gets its ticket long before 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_does_not_answer_is_passed_over_within_seconds() {
    let app = TestApp::spawn(floodgate_tests::fresh_database().await.1).await;
    let sale = app.pending_sale("gone-").await;
    // A listener with an accept queue of one (a backlog of 0), filled and never accepted: the
    // kernel drops the next SYNs, as a host that has gone does.
    let gone = tokio::net::TcpSocket::new_v4().unwrap();
    gone.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let gone = gone.listen(0).unwrap();
    let silent = gone.local_addr().unwrap();
    let _filling = tokio::net::TcpStream::connect(silent).await.unwrap();
    let edge = floodgate_tests::edge::Edge::start(&[silent, app.gateway], app.booking).await;
    for _ in 0..4 {
        let joined = tokio::time::timeout(
            Duration::from_secs(20),
            floodgate_tests::client::RoomClient::join(&edge.ws_url(&sale)),
        )
        .await;
        assert!(
            matches!(joined, Ok(Ok(_))),
            "a join through the edge waited on a gateway that does not answer"
        );
    }
    drop(gone);
}
