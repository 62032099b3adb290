//! `/healthz` and `/readyz` of every service (issue 16, "probes"): readiness reports each
//! service's dependencies (only the consumer's gate it: Redis, the broker and PostgreSQL are
//! every gateway's and booking instance's shared dependencies), `/healthz` does not, and a gateway or a booking instance told to stop
//! turns unready before it closes a socket.

use std::process::{Command, Stdio};
use std::time::Duration;

use floodgate_platform::readiness::Readiness;
use floodgate_protocol::ws::close;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::client::{Heard, RoomClient};
use floodgate_tests::gateways::{free_port, GatewayProcess, GatewayTimings};
use floodgate_tests::services::{booking_serve, start_service, Stopped};
use floodgate_tests::{
    binary, eventually, fresh_database, kafka_brokers, redis_addr, unique, SaleSpec, TestApp,
    TestOptions,
};

const WAIT: Duration = Duration::from_secs(20);

/// A probe's status and body.
async fn probe(url: &str) -> Option<(u16, Readiness)> {
    let response = reqwest::get(url).await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.ok()?))
}

/// Whether `url` answers `status` with `check` failing (or, for 200, every check passing).
async fn answers(url: &str, status: u16, failing: Option<&str>) -> bool {
    let Some((got, body)) = probe(url).await else {
        return false;
    };
    let failed: Vec<&str> = body
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.name.as_str())
        .collect();
    got == status && failed == failing.into_iter().collect::<Vec<_>>()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_reports_each_services_dependencies_and_liveness_ignores_them() {
    let (url, db) = fresh_database().await;
    let gateway_redis = ChaosProxy::start(redis_addr()).await;
    let booking_redis = ChaosProxy::start(redis_addr()).await;
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            gateway_redis_url: Some(format!("redis://{}", gateway_redis.addr)),
            booking_redis_url: Some(format!("redis://{}", booking_redis.addr)),
            ..TestOptions::default()
        },
    )
    .await;
    // The consumer binary, its PostgreSQL behind a proxy of its own.
    let pg = ChaosProxy::start("127.0.0.1:5432".parse().unwrap()).await;
    let consumer_admin = free_port();
    // Stopped however the test ends, a failed assertion included.
    let _consumer = floodgate_tests::services::Stopped(
        Command::new(binary("floodgate-consumer"))
            .env(
                "FLOODGATE_DATABASE_URL",
                url.replace("127.0.0.1:5432", &pg.addr.to_string()),
            )
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
            .env("FLOODGATE_CONSUMER_GROUP", unique("probes-"))
            .env(
                "FLOODGATE_CONSUMER_METRICS_LISTEN",
                consumer_admin.to_string(),
            )
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts"),
    );

    let gateway = format!("http://{}", app.gateway);
    let gateway_admin = format!("http://{}", app.gateway_admin);
    let booking = format!("http://{}", app.booking);
    let booking_admin = format!("http://{}", app.admin);
    let consumer_url = format!("http://{consumer_admin}");
    // Everything answers: ready everywhere.
    for base in [
        &gateway,
        &gateway_admin,
        &booking,
        &booking_admin,
        &consumer_url,
    ] {
        eventually(&format!("{base} ready"), WAIT, async || {
            answers(&format!("{base}/readyz"), 200, None).await
        })
        .await;
    }

    // Each service's dependency goes away in turn: the service says which check failed, while
    // it stays alive; and all is well again once the dependency is back. Redis is every
    // gateway's and booking instance's shared dependency: reported, never unready (the whole
    // fleet would leave its Services at once); the consumer, to which nothing routes, turns
    // unready without its PostgreSQL.
    let outages: [(&ChaosProxy, &str, u16, &[&String]); 3] = [
        (&gateway_redis, "redis", 200, &[&gateway, &gateway_admin]),
        (&booking_redis, "redis", 200, &[&booking, &booking_admin]),
        (&pg, "postgres", 503, &[&consumer_url]),
    ];
    for (proxy, dependency, status, bases) in outages {
        proxy.cut();
        for base in bases {
            eventually(&format!("{base} reports {dependency}"), WAIT, async || {
                answers(&format!("{base}/readyz"), status, Some(dependency)).await
            })
            .await;
            let alive = reqwest::get(format!("{base}/healthz")).await.unwrap();
            assert_eq!(alive.status().as_u16(), 200, "{base} is still alive");
            // Why is for operators (the admin port); the public port says which check
            // failed and nothing of the dependency's own words (addresses, versions).
            let (_, body) = probe(&format!("{base}/readyz")).await.expect("an answer");
            let public = *base == &gateway || *base == &booking;
            let reasons = body.checks.iter().filter(|c| c.error.is_some()).count();
            let failed = body.checks.iter().find(|c| c.name == dependency).unwrap();
            assert_eq!(failed.shared, status == 200, "{base}: {body:?}");
            if public {
                assert_eq!(reasons, 0, "{base} tells the public why: {body:?}");
            } else {
                assert!(reasons > 0, "{base} tells the operator why: {body:?}");
            }
        }
        proxy.restore();
        for base in bases {
            eventually(&format!("{base} ready again"), WAIT, async || {
                answers(&format!("{base}/readyz"), 200, None).await
            })
            .await;
        }
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_stopping_gateway_turns_unready_and_refuses_joins_before_it_closes_a_socket(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let mut gateway = GatewayProcess::spawn_with_env(
        &app,
        "drainer",
        &GatewayTimings::default(),
        &[("FLOODGATE_DRAIN_DELAY_MS", "3000")],
    )
    .await;
    let sale = unique("drain-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(600),
            ..SaleSpec::default()
        },
    )
    .await;
    let mut waiting = RoomClient::join(&gateway.ws_url(&sale))
        .await
        .expect("joins");
    let ready = format!("http://{}/readyz", gateway.addr);
    assert!(answers(&ready, 200, None).await);
    // What the probe found is a metric too (FloodgateFewReadyEndpoints counts the ready Pods).
    let metrics = format!("http://{}/metrics", gateway.admin);
    let served = async |value: &str| {
        let text = reqwest::get(&metrics).await.unwrap().text().await.unwrap();
        text.lines()
            .any(|line| line == format!("floodgate_ready {value}"))
    };
    assert!(
        served("1").await,
        "floodgate_ready 1 once a probe found it ready"
    );

    gateway.terminate();
    eventually("unready while draining", WAIT, async || {
        answers(&ready, 503, Some("draining")).await
    })
    .await;
    assert!(served("0").await, "floodgate_ready 0 while it drains");
    // Still serving, and not taking anyone new: a load balancer has somewhere else to send them.
    let refused = RoomClient::join(&gateway.ws_url(&sale))
        .await
        .err()
        .expect("a join is refused while draining");
    assert_eq!(
        (refused.status, refused.body["error"].as_str()),
        (503, Some("gateway_draining"))
    );
    // Then, after the drain delay, the session is closed with its resume token.
    let Heard::Closed(code, reason) = waiting.outcome(WAIT).await else {
        panic!("expected a close frame");
    };
    assert_eq!(
        (code, reason.as_str()),
        (close::SERVICE_RESTART, waiting.resume_token.as_str())
    );
    let status = gateway.wait(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

/// A reservation's 201 needs Redis and the broker, never PostgreSQL (the consumer writes it
/// later): a booking instance whose PostgreSQL goes away (a failover, say) stays in the load
/// balancer, reporting the check as shared, and goes on taking reservations; out of it, the edge
/// would have only bare 502s to give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_instance_without_postgresql_stays_ready_and_says_so() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let pg = ChaosProxy::start("127.0.0.1:5432".parse().unwrap()).await;
    let through_proxy = url.replace("127.0.0.1:5432", &pg.addr.to_string());
    let env = [
        ("FLOODGATE_OPS_TOKEN", floodgate_tests::secret("ops_")),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            floodgate_tests::secret("whsec_"),
        ),
    ];
    let (mut command, admin, api) =
        floodgate_tests::services::booking_serve(&app, &through_proxy, &env);
    let _booking = floodgate_tests::services::Stopped(
        floodgate_tests::services::start_service(&mut command, &admin).await,
    );
    for base in [&api, &admin] {
        eventually(&format!("{base} ready"), WAIT, async || {
            answers(&format!("{base}/readyz"), 200, None).await
        })
        .await;
    }

    pg.cut();
    for base in [&api, &admin] {
        eventually(&format!("{base} reports postgres"), WAIT, async || {
            answers(&format!("{base}/readyz"), 200, Some("postgres")).await
        })
        .await;
        let (_, body) = probe(&format!("{base}/readyz")).await.expect("an answer");
        let check = body.checks.iter().find(|c| c.name == "postgres").unwrap();
        assert!(check.shared, "{body:?}");
    }
    pg.restore();
}

/// A booking instance told to stop drains like a gateway: unready at once (the edge and the
/// load balancer stop sending it requests), still answering for its drain delay (a request
/// already routed to it is served, not reset), then gone with a clean exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_booking_instance_turns_unready_and_keeps_serving_for_its_drain_delay() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let env = [
        ("FLOODGATE_DRAIN_DELAY_MS", "3000".to_owned()),
        ("FLOODGATE_OPS_TOKEN", floodgate_tests::secret("ops_")),
        (
            "FLOODGATE_WEBHOOK_SECRET",
            floodgate_tests::secret("whsec_"),
        ),
    ];
    let (mut command, admin, api) = booking_serve(&app, &url, &env);
    let mut booking = Stopped(start_service(&mut command, &admin).await);
    let ready = format!("{api}/readyz");
    eventually("ready", WAIT, async || answers(&ready, 200, None).await).await;

    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(booking.0.id().to_string())
        .status();
    eventually("unready while draining", WAIT, async || {
        answers(&ready, 503, Some("draining")).await
    })
    .await;
    // Still serving what reaches it meanwhile: a reservation's read answers as ever.
    let read = reqwest::Client::new()
        .get(format!("{api}/v1/sales/none/reservations/r-1"))
        .bearer_auth("s")
        .send()
        .await
        .expect("a request during the drain is answered");
    assert_eq!(read.status(), 404);
    // Then it stops by itself, cleanly.
    let exited = eventually("exits after the drain", WAIT, async || {
        booking.0.try_wait().ok().flatten()
    })
    .await;
    assert!(exited.success(), "{exited:?}");
}

/// The consumer stops like the other two: unready at once (`/readyz` 503 `draining`), its admin
/// listener still answering for the drain delay it is given, then its listener closes
/// gracefully, its group is told goodbye and the process exits cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_consumer_turns_unready_then_ends_cleanly() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let admin = free_port();
    let mut consumer = Stopped(
        Command::new(binary("floodgate-consumer"))
            .env("FLOODGATE_DATABASE_URL", &url)
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
            .env("FLOODGATE_CONSUMER_GROUP", unique("draining-"))
            .env("FLOODGATE_CONSUMER_METRICS_LISTEN", admin.to_string())
            .env("FLOODGATE_CONSUMER_DRAIN_DELAY_MS", "3000")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts"),
    );
    let ready = format!("http://{admin}/readyz");
    eventually("ready", WAIT, async || answers(&ready, 200, None).await).await;

    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(consumer.0.id().to_string())
        .status();
    eventually("unready while draining", WAIT, async || {
        answers(&ready, 503, Some("draining")).await
    })
    .await;
    let metrics = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .expect("the admin listener answers during the drain");
    assert_eq!(metrics.status(), 200);
    let exited = eventually("exits after the drain", WAIT, async || {
        consumer.0.try_wait().ok().flatten()
    })
    .await;
    assert!(exited.success(), "{exited:?}");
}

/// A consumer whose loop cannot start (here a Kafka property its consumer client refuses) ends
/// the process with an error, so that the platform restarts it and says so, rather than serving
/// `/readyz` 200 while it applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_whose_loop_fails_exits_instead_of_idling() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let mut consumer = Stopped(
        Command::new(binary("floodgate-consumer"))
            .env("FLOODGATE_DATABASE_URL", &url)
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
            .env("FLOODGATE_CONSUMER_GROUP", unique("failing-"))
            .env("FLOODGATE_CONSUMER_METRICS_LISTEN", free_port().to_string())
            .env("FLOODGATE_KAFKA_CONSUMER_NO_SUCH_PROPERTY", "1")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts"),
    );
    let exited = eventually("the consumer exits", WAIT, async || {
        consumer.0.try_wait().ok().flatten()
    })
    .await;
    assert!(!exited.success(), "{exited:?}");
}

/// A service told to stop while it is still starting (here a consumer whose PostgreSQL accepted
/// the connection and never answered) stops at once, cleanly, rather than going on waiting for
/// its dependencies and then failing: an orchestrator's stop during a slow start must not take
/// the whole grace period and end in a SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_told_to_stop_while_starting_stops_at_once() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let database = format!(
        "postgres://postgres@{}/silent?sslmode=disable",
        silent.local_addr().unwrap()
    );
    let mut consumer = Stopped(
        Command::new(binary("floodgate-consumer"))
            .env("FLOODGATE_DATABASE_URL", &database)
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_CONSUMER_GROUP", unique("starting-"))
            .env("FLOODGATE_CONSUMER_METRICS_LISTEN", free_port().to_string())
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts"),
    );
    // Its build is under way: it is waiting for the database's first word.
    let (_held, _) = tokio::time::timeout(WAIT, silent.accept())
        .await
        .expect("the consumer connects to its database")
        .unwrap();
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(consumer.0.id().to_string())
        .status();
    // The pool's own timeout is 30 s: an exit well before it is the stop's doing.
    let exited = eventually("exits while starting", WAIT, async || {
        consumer.0.try_wait().ok().flatten()
    })
    .await;
    assert!(exited.success(), "{exited:?}");
}
