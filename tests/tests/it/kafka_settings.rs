//! Every librdkafka setting reachable (issue 16), on the real binaries: `--help` shows
//! Floodgate's defaults; a `FLOODGATE_KAFKA_PRODUCER_<NAME>` reaches librdkafka (a bad value is
//! its error at start, a good one changes what is sent: zstd, compiled in, end to end); what an
//! invariant rests on cannot be changed.

use std::process::Command;

use floodgate_tests::services::{booking_serve, start_service};
use floodgate_tests::{
    binary, eventually, fresh_database, run_to_end, secret, unique, SaleSpec, TestApp,
};

#[test]
fn help_shows_how_properties_pass_and_the_defaults() {
    for (binary_name, args) in [
        ("floodgate-consumer", vec!["--help"]),
        ("floodgate-booking", vec!["serve", "--help"]),
        ("floodgate-booking", vec!["topics", "ensure", "--help"]),
    ] {
        let (code, said) = run_to_end(Command::new(binary(binary_name)).args(&args));
        assert_eq!(code, 0, "{said}");
        for expected in [
            "FLOODGATE_KAFKA_PRODUCER_<NAME>",
            "Producer defaults: acks=all, enable.idempotence=true, linger.ms=5, compression.type=lz4",
            "Consumer defaults: enable.auto.commit=false",
            "FLOODGATE_KAFKA_SASL_PASSWORD",
        ] {
            assert!(said.contains(expected), "{binary_name} {args:?}: {said}");
        }
    }
    // The gateway has no Kafka client: no such section.
    let (_, said) = run_to_end(Command::new(binary("floodgate-gateway")).args(["serve", "--help"]));
    assert!(!said.contains("Kafka client properties"), "{said}");
}

/// The extra settings of a booking process that starts (its secrets).
fn secrets() -> Vec<(&'static str, String)> {
    vec![
        ("FLOODGATE_OPS_TOKEN", secret("ops_")),
        ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_property_reaches_librdkafka_and_zstd_is_compiled_in() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;

    // librdkafka itself judges the value: the service stops at start, naming the property.
    let mut env = secrets();
    env.push((
        "FLOODGATE_KAFKA_PRODUCER_COMPRESSION_TYPE",
        "snappy-ish".into(),
    ));
    let (mut command, _, _) = booking_serve(&app, &url, &env);
    let (code, said) = run_to_end(&mut command);
    assert_ne!(code, 0, "{said}");
    assert!(said.contains("compression.type"), "{said}");

    // What an invariant rests on is refused, saying why.
    let mut env = secrets();
    env.push(("FLOODGATE_KAFKA_PRODUCER_ACKS", "1".into()));
    let (mut command, _, _) = booking_serve(&app, &url, &env);
    let (code, said) = run_to_end(&mut command);
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains("acks is set by Floodgate and cannot be changed"),
        "{said}"
    );

    // zstd (not the lz4 default) from the booking process to the broker to the consumer.
    let mut env = secrets();
    env.push(("FLOODGATE_KAFKA_PRODUCER_COMPRESSION_TYPE", "zstd".into()));
    let (mut command, admin, api) = booking_serve(&app, &url, &env);
    let mut booking = start_service(&mut command, &admin).await;
    let sale = app.open_sale("zstd-", SaleSpec::default()).await;
    let token = app.token(&sale, 1, 1, 60_000);
    let body = serde_json::json!({ "pool": "p1", "seats": 1 });
    let (status, answer) = app
        .post_reservation_at(&api, &sale, &token, &unique("k"), &body)
        .await;
    assert_eq!(status, 201, "{answer}");
    eventually(
        "the consumer applies the zstd batch",
        std::time::Duration::from_secs(30),
        || async { app.bookings(&sale, "PENDING_PAYMENT").await == 1 },
    )
    .await;
    let _ = booking.kill();
    let _ = booking.wait();
}
