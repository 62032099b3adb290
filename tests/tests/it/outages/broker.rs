//! The broker's storage dying under the booking service, as Tansu 0.6's sqlite engine did under
//! load (its port stays open, every request fails): the service notices at once and says so to
//! every client without touching Redis, stays ready (every instance shares the fault), and
//! notices the broker's return by itself.

use std::time::Duration;

use floodgate_platform::readiness::Readiness;
use floodgate_tests::broker::PrivateBroker;
use floodgate_tests::{eventually, TestApp};

use super::{app_on, counters, key, open_sale};

#[sqlx::test(migrations = "../migrations")]
async fn a_dead_broker_is_answered_at_once_and_its_return_noticed(db: sqlx::PgPool) {
    let mut broker = PrivateBroker::start_sqlite().await;
    let app = app_on(db, &broker).await;
    let sale = open_sale(&app, 5).await;
    let first = app.token(&sale, 1, 1, 120_000);
    app.reserve(&sale, &first, &key(), "p1", 1)
        .await
        .expect("201 while the broker is well");

    // Through a topic of its own: nothing the consumer reads.
    let killer = floodgate_tests::unique("storage-killer-");
    floodgate_tests::create_topic(&broker.address(), &killer, 1).await;
    broker.kill_storage(&killer).await;

    // The first reservation to meet the dead broker waits for its publish and is taken back.
    let unlucky = app.token(&sale, 2, 1, 120_000);
    let refused = app.reserve(&sale, &unlucky, &key(), "p1", 1).await;
    assert_eq!(
        refused.as_ref().err().map(|f| f.code()),
        Some("broker_unavailable")
    );

    // From then on the service knows: a reservation is refused before anything is written to
    // Redis (no claim of its pass, no hold and no event to take back), with a Retry-After.
    let third = app.token(&sale, 3, 1, 120_000);
    let third_key = key();
    let answer = app.reserve(&sale, &third, &third_key, "p1", 1).await;
    let Err(floodgate_client::booking::Failure::Refused {
        status,
        body,
        retry_after,
    }) = answer
    else {
        panic!("a refusal, not {answer:?}");
    };
    assert_eq!((status, body.error.as_str()), (503, "broker_unavailable"));
    assert!(retry_after.is_some_and(|s| s >= 1), "{retry_after:?}");
    let jti = app.signer.verifier().verify(&third, 0).unwrap().jti;
    let claim = app.keys.sale(&sale).token(&jti);
    assert_eq!(
        app.redis_int_cmd("EXISTS", &claim).await,
        0,
        "the pass was not even claimed"
    );
    assert_eq!(counters(&app, &sale).await, (4, 1), "one hold, the first");

    // Every booking instance shares the fault: it stays ready (all of them unready would make
    // the edge answer bare 502s), and says what is wrong.
    let readiness = readyz(&app).await;
    assert_eq!(
        (readiness.0, readiness.1.ready()),
        (200, true),
        "{readiness:?}"
    );
    let kafka = readiness.1.checks.iter().find(|c| c.name == "kafka");
    assert!(kafka.is_some_and(|c| !c.ok), "{readiness:?}");

    // The broker is restarted on its data. Nobody books meanwhile: the service's own probe
    // notices it is back, and the same request then gets its 201.
    broker.stop();
    broker.resume().await;
    eventually("the service sees the broker back", WAIT, || async {
        let (_, readiness) = readyz(&app).await;
        readiness.checks.iter().any(|c| c.name == "kafka" && c.ok)
    })
    .await;
    app.reserve(&sale, &third, &third_key, "p1", 1)
        .await
        .expect("201 once the broker is back");
    assert_eq!(counters(&app, &sale).await, (3, 2));
}

const WAIT: Duration = Duration::from_secs(30);

/// The booking API's `/readyz`: its status and body.
async fn readyz(app: &TestApp) -> (u16, Readiness) {
    let answer = reqwest::get(format!("http://{}/readyz", app.booking))
        .await
        .expect("/readyz answers");
    let status = answer.status().as_u16();
    (status, answer.json().await.expect("a readiness body"))
}

/// `deploy/stack.sh kafka` (what `up` runs for the broker) checks a running broker by a produce
/// and fetch round trip, and restarts one whose storage died, instead of reporting it up because
/// its port answers. Run on a broker of its own (its own home, port and data).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_script_restarts_a_broker_whose_storage_died() {
    let home = std::env::temp_dir().join(floodgate_tests::unique("floodgate-stack-"));
    let port = floodgate_tests::gateways::free_port().port();
    let address = format!("127.0.0.1:{port}");
    let stack = |command: &str| {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/stack.sh");
        let output = std::process::Command::new(script)
            .arg(command)
            .env("FLOODGATE_HOME", &home)
            .env("FLOODGATE_KAFKA_PORT", port.to_string())
            .env("FLOODGATE_TANSU", floodgate_tests::broker::tansu_binary())
            .output()
            .expect("stack.sh runs");
        let said = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "stack.sh {command}: {said}");
        said
    };
    let pid = || -> u32 {
        std::fs::read_to_string(home.join("tansu.pid"))
            .expect("the broker's pid file")
            .trim()
            .parse()
            .expect("a pid")
    };
    /// Stops the stack's broker and removes its home however the test ends.
    struct Down<F: Fn(&str) -> String>(F, std::path::PathBuf);
    impl<F: Fn(&str) -> String> Drop for Down<F> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.0)("down")));
            } else {
                (self.0)("down");
            }
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    stack("kafka");
    let _down = Down(&stack, home.clone());
    let topic = floodgate_tests::unique("stack-");
    floodgate_tests::create_topic(&address, &topic, 1).await;
    assert!(floodgate_tests::broker::round_trip(&address, &topic).await);
    let first = pid();

    floodgate_tests::broker::kill_storage(&address, first, &topic).await;
    let said = stack("kafka");
    assert!(said.contains("restart"), "{said}");
    assert_ne!(pid(), first, "a new broker process");
    assert!(
        floodgate_tests::broker::round_trip(&address, &topic).await,
        "the restarted broker takes and gives back a message: {said}"
    );
}
