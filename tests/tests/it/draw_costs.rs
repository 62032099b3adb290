//! What the draw's public record costs a stranger's requests (protocol 1.6): a page of nonces
//! reads thousands of them from the sale's slot, so each gateway keeps a closed draw's answers
//! in memory, reads the record from Redis within a budget of its own, and limits each address.

use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, unique, SaleSpec, TestApp, TestOptions};

/// `GET path` on the gateway as the client at `address` behind the trusted proxy: the status,
/// and the error code of a refusal.
async fn ask(app: &TestApp, path: &str, address: &str) -> (u16, Option<String>) {
    app.gateway_get(path, &[("x-forwarded-for", address)]).await
}

#[sqlx::test(migrations = "../migrations")]
async fn the_draws_record_costs_bounded_redis_work_however_it_is_asked_for(db: sqlx::PgPool) {
    let options = TestOptions {
        // The test itself is the only proxy in front: it names each request's client.
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        draw_reads_per_sec: 2,
        draw_requests_per_sec_per_ip: 3,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("draw-");
    let spec = SaleSpec {
        opens_in: Duration::from_millis(800),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let _early: Vec<RoomClient> = futures::future::join_all(
        (0..3).map(|_| async { RoomClient::join(&app.ws_url(&sale)).await.unwrap() }),
    )
    .await;
    let draw = format!("http://{}/v1/sales/{sale}/draw", app.gateway);
    eventually("the draw", Duration::from_secs(20), || async {
        app.get_json(&draw).await["status"] == "drawn"
    })
    .await;

    // A crowd from many addresses asks for the same final page: it is read once, then answered
    // from memory, far past the read budget.
    let page = format!("/v1/sales/{sale}/draw/nonces?from=1&count=10000");
    for n in 0..100 {
        let address = format!("10.0.{}.{}", n / 200, n % 200 + 1);
        assert_eq!(ask(&app, &page, &address).await, (200, None), "request {n}");
    }

    // Pages that are each new (a varied `from`) each cost a read: past the gateway's budget of
    // 2 a second (bursts of 4) they are refused, whoever asks.
    let started = tokio::time::Instant::now();
    let mut read = 0;
    let mut busy = 0;
    for from in 2..=40 {
        let path = format!("/v1/sales/{sale}/draw/nonces?from={from}&count=2");
        match ask(&app, &path, &format!("10.{from}.0.1")).await {
            (200, None) => read += 1,
            (503, Some(code)) if code == "draw_busy" => busy += 1,
            other => panic!("from={from}: {other:?}"),
        }
    }
    let allowed = 4 + 2 * started.elapsed().as_secs() + 2;
    assert!(busy > 0, "{read} reads, none refused");
    assert!(
        read <= allowed,
        "{read} reads from Redis, more than the budget's {allowed}"
    );

    // One address asking fast is slowed down before it reaches the budget at all.
    let mut limited = 0;
    for _ in 0..12 {
        if ask(&app, &page, "10.2.0.1").await == (429, Some("draw_rate_limited".into())) {
            limited += 1;
        }
    }
    assert!(limited > 0, "one address asked 12 times at once unrefused");
}

/// The record's first page is guarded like the rest: a stranger asking for the draw of made-up
/// sales (each a Redis read, and a 404 no cache keeps) is held to its address's allowance, and
/// someone at another address still reads a real sale's draw. Before, `GET .../draw` read Redis
/// for every request, from any address, as fast as they came.
#[sqlx::test(migrations = "../migrations")]
async fn made_up_sales_draws_are_held_to_the_addresss_allowance(db: sqlx::PgPool) {
    let options = TestOptions {
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        draw_requests_per_sec_per_ip: 3,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("draw-real-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let mut answers = Vec::new();
    for n in 0..12 {
        let path = format!("/v1/sales/{}/draw", unique(&format!("made-up-{n}-")));
        answers.push(ask(&app, &path, "10.3.0.1").await);
    }
    let limited = answers
        .iter()
        .filter(|a| **a == (429, Some("draw_rate_limited".into())))
        .count();
    assert!(limited >= 4, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|a| *a == (404, Some("unknown_sale".into()))
                || *a == (429, Some("draw_rate_limited".into()))),
        "{answers:?}"
    );
    let real = ask(&app, &format!("/v1/sales/{sale}/draw"), "10.3.0.2").await;
    assert_eq!(real, (200, None));
}
