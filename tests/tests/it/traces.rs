//! Traces across the path (issue 17): the real booking and consumer binaries export their spans
//! by OTLP (HTTP, JSON) to a collector this test plays, and one reservation's spans share a
//! trace id from the booking handler, through the Kafka event's headers, to the consumer's write.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_tests::services::{booking_serve, start_service, Stopped};
use floodgate_tests::{binary, eventually, fresh_database, kafka_brokers, secret, unique};
use floodgate_tests::{SaleSpec, TestApp};

type Received = Arc<Mutex<Vec<serde_json::Value>>>;

/// An OTLP/HTTP collector that keeps every JSON export it is sent.
async fn collector() -> (SocketAddr, Received) {
    let received: Received = Arc::default();
    let keep = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let keep = keep.clone();
            async move {
                if let Ok(export) = serde_json::from_slice(&body) {
                    keep.lock().unwrap().push(export);
                }
                axum::Json(serde_json::json!({}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, received)
}

/// Every span received: (service, span name, trace id).
fn spans(received: &Received) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for export in received.lock().unwrap().iter() {
        for resource in export["resourceSpans"].as_array().into_iter().flatten() {
            let service = resource["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["key"] == "service.name")
                .and_then(|a| a["value"]["stringValue"].as_str())
                .unwrap_or_default()
                .to_owned();
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    all.push((
                        service.clone(),
                        span["name"].as_str().unwrap_or_default().to_owned(),
                        span["traceId"].as_str().unwrap_or_default().to_owned(),
                    ));
                }
            }
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reservations_spans_share_a_trace_id_from_the_booking_handler_to_the_consumer() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let (collector, received) = collector().await;
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}")),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    let mut env = vec![
        ("FLOODGATE_OPS_TOKEN", secret("ops_")),
        ("FLOODGATE_WEBHOOK_SECRET", secret("whsec_")),
    ];
    env.extend(otel.iter().cloned());
    let (mut command, admin, api) = booking_serve(&app, &url, &env);
    let _booking = Stopped(start_service(&mut command, &admin).await);
    let _consumer = Stopped(
        Command::new(binary("floodgate-consumer"))
            .env("FLOODGATE_DATABASE_URL", &url)
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("FLOODGATE_RESERVATIONS_TOPIC", &app.topic)
            .env("FLOODGATE_CONSUMER_GROUP", unique("traced-"))
            .env("FLOODGATE_CONSUMER_METRICS_LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "warn")
            .envs(otel.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .spawn()
            .expect("the consumer binary starts"),
    );

    let sale = unique("traced-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(200),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    let token = app.token(&sale, 1, 1, 60_000);
    let (status, body) = app
        .post_reservation_at(
            &api,
            &sale,
            &token,
            &unique("k"),
            &serde_json::json!({"pool": "p1", "seats": 1}),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    // The handler's span and the consumer's write, in one trace.
    let trace = eventually(
        "the booking handler's span",
        Duration::from_secs(20),
        async || {
            spans(&received)
                .into_iter()
                .find(|(service, name, _)| {
                    service == "floodgate-booking" && name == "create_reservation"
                })
                .map(|(_, _, trace)| trace)
        },
    )
    .await;
    assert_eq!(trace.len(), 32, "a W3C trace id: {trace}");
    eventually(
        "the consumer's write in the same trace",
        Duration::from_secs(30),
        async || {
            spans(&received).iter().any(|(service, name, id)| {
                service == "floodgate-consumer" && name == "write booking" && *id == trace
            })
        },
    )
    .await;
    // The broker's acknowledgement is part of it too.
    assert!(
        spans(&received)
            .iter()
            .any(|(service, name, id)| service == "floodgate-booking"
                && name == "publish"
                && *id == trace),
        "{:?}",
        spans(&received)
    );
}
