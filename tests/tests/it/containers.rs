//! The shipped deployment run for real: the image `deploy/image.sh` built, the services of
//! `deploy/compose.yaml` in containers behind the edge's image, and a sale driven through the
//! edge only (`floodgate_tests::containers` says how compose's services become containers on
//! the host's network). `deploy/test.sh` builds the images and starts the engine first.
//! [`journey`]: a signed-in buyer in Chromium through the edge; [`alerts`]: a real Prometheus
//! and the shipped alert rules; [`budget`]: a gateway's session budget in its container.

use std::net::IpAddr;
use std::time::Duration;

use floodgate_client::BookingClient;
use floodgate_tests::broker::PrivateBroker;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::client::{Heard, Refused, RoomClient};
use floodgate_tests::containers::{Docker, Stack, StackOptions};
use floodgate_tests::prometheus::Prometheus;
use floodgate_tests::{eventually, fresh_database, redis_url, scrape, unique, SaleSpec};

mod alerts;
mod budget;
mod journey;

/// Addresses `127.0.<third>.1` to `127.0.<third>.<count>`: clients of their own, each counted
/// apart by the gateways' per-address limits behind the edge.
fn addresses(third: u8, count: u8) -> Vec<String> {
    (1..=count).map(|n| format!("127.0.{third}.{n}")).collect()
}

/// Joins through the edge from `from`, with `headers`; a join refused only for arriving too
/// fast from one address (5 a second, a burst of 10) is tried again a moment later, as a client
/// honouring `Retry-After` would.
async fn join(
    stack: &Stack,
    sale: &str,
    from: &str,
    headers: &[(&str, &str)],
) -> Result<RoomClient, Refused> {
    let from: IpAddr = from.parse().unwrap();
    // 5 joins a second an address, on each gateway: a minute covers hundreds.
    for _ in 0..240 {
        match RoomClient::join_from(&stack.ws_url(sale), Some(from), headers).await {
            Err(r) if r.status == 429 && r.body["error"] == "join_rate_limited" => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            other => return other,
        }
    }
    panic!("{from} was refused as joining too fast for a minute")
}

fn too_many(refused: Refused) {
    assert_eq!(
        (refused.status, refused.body["error"].as_str()),
        (429, Some("too_many_connections")),
        "{refused:?}"
    );
}

/// Each container, the edge's too, runs as the image's unprivileged user on a read-only root,
/// with no capability and no way to gain privileges.
fn runs_unprivileged_and_read_only(stack: &Stack, names: &[String]) {
    for name in names {
        let seen = stack.docker.ok(&[
            "inspect",
            "--format",
            "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} \
             {{.HostConfig.SecurityOpt}}",
            name,
        ]);
        assert_eq!(
            seen, "10001:10001 true [ALL] [no-new-privileges:true]",
            "{name}"
        );
    }
}

/// Where the load generator sends its people, and where it checks the outcome.
#[derive(Clone)]
struct Rush {
    edge: String,
    sandbox: String,
    database_url: String,
    prefix: String,
}

impl Rush {
    fn of(stack: &Stack) -> Rush {
        Rush {
            edge: stack.edge.to_string(),
            sandbox: stack.sandbox.listen("FLOODGATE_SANDBOX_LISTEN").to_string(),
            database_url: stack.database_url.clone(),
            prefix: stack.prefix.clone(),
        }
    }

    /// The load generator's sale scenario with every request through the edge (the waiting
    /// room, the booking API, and so the payment provider's webhook), `clients` people from
    /// the addresses `from`: its exit status, what it printed and its report.
    fn run(&self, sale: &str, clients: u32, from: &[String]) -> (i32, String, serde_json::Value) {
        let (clients, from, redis) = (clients.to_string(), from.join(","), redis_url());
        floodgate_tests::loadgen(&[
            "sale",
            "--sale",
            sale,
            "--clients",
            &clients,
            "--gateways",
            &self.edge,
            "--booking",
            &self.edge,
            "--sandbox",
            &self.sandbox,
            "--from",
            &from,
            "--pay-ratio",
            "0.6",
            "--seats",
            "2",
            "--timeout-secs",
            "240",
            "--database-url",
            &self.database_url,
            "--redis-url",
            &redis,
            "--redis-prefix",
            &self.prefix,
        ])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_runs_through_the_shipped_edge_into_the_compose_stack() {
    let (url, db) = fresh_database().await;
    let stack = Stack::up(&url, StackOptions::default()).await;
    assert_eq!(stack.gateways.len(), 2, "compose runs two gateways");
    assert_eq!(
        stack.bookings.len(),
        2,
        "compose runs two booking instances"
    );
    let names: Vec<String> = stack
        .gateways
        .iter()
        .chain(&stack.bookings)
        .chain([&stack.consumer, &stack.sandbox])
        .map(|c| c.name.clone())
        .chain([stack.edge_name()])
        .collect();
    runs_unprivileged_and_read_only(&stack, &names);
    // Each service's metrics say which release it runs and how many files it holds against
    // its limit (what a gateway runs out of first).
    for target in stack.metrics_targets() {
        for series in [
            &format!(
                "floodgate_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            ),
            "process_open_fds",
            "process_max_fds",
        ] {
            let value = scrape(target, series).await;
            assert!(
                value.is_some_and(|v| v > 0.0),
                "{target}: {series} is {value:?}"
            );
        }
    }
    // The edge's image counts its connections (its Lua module loaded): this scrape's own, at
    // least.
    let active = scrape(
        stack.edge_metrics,
        "floodgate_edge_connections{state=\"active\"}",
    )
    .await;
    assert!(
        active.is_some_and(|v| v >= 1.0),
        "the edge's metrics: {active:?}"
    );

    // A waiting room nobody is admitted from yet: who is who at the edge.
    let waiting = unique("compose-wait-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3_600),
        ..SaleSpec::default()
    };
    stack.create_sale(&db, &waiting, &spec).await;
    // Each gateway holds 32 sessions an address (compose's default), so behind an edge that
    // balances over two, one client gets 64 and not one more; a client beside it still gets
    // in, and one who claims the full address in X-Forwarded-For is still itself.
    let per_gateway = 32 * stack.gateways.len();
    let mut held = Vec::new();
    let mut refused = 0;
    while held.len() < per_gateway {
        match join(&stack, &waiting, "127.0.9.1", &[]).await {
            Ok(client) => held.push((client, ())),
            Err(r) => {
                too_many(r);
                refused += 1;
                assert!(refused < 50, "the edge never reached the other gateway");
            }
        }
    }
    for _ in 0..4 {
        too_many(
            join(&stack, &waiting, "127.0.9.1", &[])
                .await
                .err()
                .expect("a 65th"),
        );
    }
    let forged = join(
        &stack,
        &waiting,
        "127.0.9.2",
        &[("x-forwarded-for", "127.0.9.1")],
    )
    .await;
    forged.expect("127.0.9.2 is not 127.0.9.1, whatever it says");
    for (client, _) in held {
        client.leave().await;
    }
    // Twenty people waiting, each from an address of their own, for the gateway stopped below.
    let mut held = Vec::new();
    for from in addresses(10, 20) {
        let client = join(&stack, &waiting, &from, &[]).await;
        held.push((client.expect("a waiting client joins"), from));
    }

    // A path nothing serves: the gateways' JSON 404 through the edge, nothing cached.
    let unrouted = reqwest::get(stack.url("/v1/nowhere")).await.unwrap();
    assert_eq!(unrouted.status(), 404);
    let body: serde_json::Value = unrouted.json().await.unwrap();
    assert!(
        body["error"].is_string() && body["message"].is_string(),
        "{body}"
    );

    // The rush: 2,000 people from 400 addresses, every request through the edge, and halfway
    // through, a gateway stopped as a release stops it and the consumer killed as a crash does.
    let sale = unique("compose-rush-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 40), ("p2".into(), 40)],
        opens_in: Duration::from_secs(3),
        admission_rate: 200.0,
        max_seats: 2,
        hold_ttl_secs: 3,
        token_ttl_secs: 20,
        ..SaleSpec::default()
    };
    stack.create_sale(&db, &sale, &spec).await;
    let from: Vec<String> = (1..=4).flat_map(|third| addresses(third, 100)).collect();
    let rushing = {
        let (rush, sale) = (Rush::of(&stack), sale.clone());
        tokio::task::spawn_blocking(move || rush.run(&sale, 2_000, &from))
    };
    let stopped = stack.gateways[0].clone();
    let admin = stopped.listen("FLOODGATE_GATEWAY_ADMIN_LISTEN");
    eventually(
        "the rush is on the gateway to be stopped",
        Duration::from_secs(60),
        async || {
            scrape(admin, "floodgate_ws_sessions")
                .await
                .is_some_and(|n| n > 100.0)
        },
    )
    .await;
    // The consumer dies at the same moment (SIGKILL: no goodbye to the group, no batch
    // finished); it is started again once the gateway has gone.
    stack.docker.ok(&["kill", &stack.consumer.name]);
    let docker = stack.docker.clone();
    let name = stopped.name.clone();
    let stopping = tokio::task::spawn_blocking(move || docker.ok(&["stop", "--time", "30", &name]));

    // The waiting clients the stopped gateway held were told to come back (1012, the resume
    // token as the reason); they come back through the edge and find the other gateway holding
    // their places. The others were never disturbed.
    stopping.await.unwrap();
    assert_eq!(
        stack.exited(&stopped.name, Duration::from_secs(5)).await,
        0,
        "the stopped gateway drained and exited cleanly"
    );
    // It has gone: what it said to each of its clients is waiting in their sockets.
    let ws = stack.ws_url(&waiting);
    let came_back = futures::future::join_all(
        held.into_iter()
            .map(|(client, from)| come_back(client, from.parse().unwrap(), &ws)),
    )
    .await;
    let moved = came_back.iter().filter(|moved| **moved).count();
    assert!(
        moved > 0 && moved < came_back.len(),
        "{moved} of {} moved: the edge balanced them over both gateways",
        came_back.len()
    );

    stack.docker.ok(&["start", &stack.consumer.name]);

    let (status, stdout, report) = rushing.await.unwrap();
    assert_eq!(status, 0, "{stdout}");
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["ok"] == true), "{stdout}");
    let outcomes = &report["outcomes"];
    assert_eq!(outcomes["failed"], 0, "{report}");
    let paid = outcomes["paid"].as_u64().unwrap();
    assert!(paid > 0, "{report}");
    // Every payment was confirmed by the provider's webhook, which reached the booking service
    // through the edge: as many confirmed bookings as people who paid, and never more seats
    // than the sale has.
    let (confirmed, seats): (i64, i64) = sqlx::query_as(
        "select count(*), coalesce(sum(seats), 0)::bigint from bookings \
         where sale_id = $1 and status = 'CONFIRMED'",
    )
    .bind(&sale)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(confirmed as u64, paid, "{report}");
    assert!(seats <= 80, "{seats} seats confirmed of 80");
}

/// A waiting client after its gateway may have been stopped: if the drain closed its socket
/// (1012, the resume token as the reason), it comes back through the edge at `ws` from its
/// address and must find its own place; whether it had to.
async fn come_back(mut client: RoomClient, from: IpAddr, ws: &str) -> bool {
    let ticket = client.ticket;
    // Its line's news first, if any; a client whose gateway still runs then hears nothing.
    let mut heard = client.try_next(Duration::from_secs(3)).await;
    while let Some(Heard::Message(_)) = heard {
        heard = client.try_next(Duration::from_secs(3)).await;
    }
    match heard {
        None => false,
        Some(Heard::Closed(1012, token)) => {
            let protocols = format!("floodgate, floodgate-resume.{token}");
            let back =
                RoomClient::join_from(ws, Some(from), &[("sec-websocket-protocol", &protocols)])
                    .await
                    .unwrap_or_else(|r| panic!("ticket {ticket} could not come back: {r:?}"));
            assert!(back.resumed, "ticket {ticket} came back as someone new");
            assert_eq!(back.ticket, ticket, "ticket {ticket} lost its place");
            true
        }
        Some(other) => panic!("ticket {ticket} heard {other:?}"),
    }
}

/// `docker run --rm --network host <image> <args>` with `settings` and `volumes`: its exit
/// status and everything it printed.
fn run_once(
    docker: &Docker,
    image: &str,
    settings: &[(&str, &str)],
    volumes: &[String],
    args: &[&str],
) -> (i32, String) {
    let mut all: Vec<String> = ["run", "--rm", "--network", "host", "--read-only"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for (k, v) in settings {
        all.extend(["--env".into(), format!("{k}={v}")]);
    }
    for v in volumes {
        all.extend(["--volume".into(), v.clone()]);
    }
    all.push(image.to_owned());
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = docker.run(&all);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Started wrongly, each image stops at once and says what to fix: a required setting missing,
/// a secret file missing, a secret file it may not read, the edge with no gateways named.
#[test]
fn an_image_started_without_what_it_needs_stops_and_names_it() {
    let docker = Docker::from_env();
    let image = docker.image.clone();

    let (status, said) = run_once(&docker, &image, &[], &[], &["floodgate-gateway", "serve"]);
    assert_ne!(status, 0, "{said}");
    assert!(
        said.contains("FLOODGATE_TOKEN_SIGNING_KEY (or FLOODGATE_TOKEN_SIGNING_KEY_FILE)"),
        "{said}"
    );

    let dir = std::env::temp_dir().join(unique("fgc-secret-"));
    std::fs::create_dir_all(&dir).unwrap();
    let unreadable = dir.join("ops_token");
    std::fs::write(&unreadable, "ops_0123456789abcdef0123456789").unwrap();
    // The owner's only: the container's user (10001) may not read it.
    std::fs::set_permissions(
        &unreadable,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let mount = format!("{}:/run/secrets/ops_token:ro", unreadable.display());
    for (file, volumes) in [
        ("/run/secrets/missing", Vec::new()),
        ("/run/secrets/ops_token", vec![mount.clone()]),
    ] {
        let (status, said) = run_once(
            &docker,
            &image,
            &[("FLOODGATE_OPS_TOKEN_FILE", file)],
            &volumes,
            &["floodgate-booking", "serve"],
        );
        assert_ne!(status, 0, "{said}");
        assert!(
            said.contains("FLOODGATE_OPS_TOKEN_FILE") && said.contains(file),
            "{file}: {said}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);

    let (status, said) = run_once(
        &docker,
        &docker.edge_image,
        &[("FLOODGATE_EDGE_BOOKING", "127.0.0.1:1")],
        &[],
        &[],
    );
    assert_ne!(status, 0, "{said}");
    assert!(
        said.contains("FLOODGATE_EDGE_GATEWAYS is not set"),
        "{said}"
    );
}
