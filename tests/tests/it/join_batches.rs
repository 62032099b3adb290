//! Joins sent in batches (issue 15, "the sale's slot is not the ceiling"): the joins a gateway
//! receives while its previous batch is in flight go to Redis as one batch, in arrival order,
//! with one committed root, and every client can still find and prove its own nonce. The
//! gateway's replies from Redis are held back (a fault-injecting proxy) so that the joins
//! really do arrive while a batch is in flight, and the test knows it.

use std::time::Duration;

use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::client::RoomClient;
use floodgate_tests::gateways::{GatewayProcess, GatewayTimings};
use floodgate_tests::{eventually, unique, SaleSpec, TestApp, TestOptions};
use serde_json::Value;

use crate::fairness::verifier;

const WAIT: Duration = Duration::from_secs(20);
const GATHERED: usize = 20;

async fn get_json(app: &TestApp, path: &str) -> Value {
    app.get_json(&format!("http://{}{path}", app.gateway)).await
}

/// Joins waiting at the test app's gateway for their batch to be answered.
async fn in_flight(app: &TestApp) -> usize {
    app.metric(app.gateway_admin, "floodgate_joins_in_flight")
        .await
        .unwrap_or(0.0) as usize
}

async fn ticket_sequence(app: &TestApp, sale: &str) -> u64 {
    let seq = app.keys.sale(sale).seq();
    let mut conn = app.redis.clone();
    redis::cmd("GET")
        .arg(&seq)
        .query_async::<Option<u64>>(&mut conn)
        .await
        .expect("redis")
        .unwrap_or(0)
}

fn join_with_nonce(app: &TestApp, sale: &str, nonce: &str) -> tokio::task::JoinHandle<RoomClient> {
    let url = format!("{}&nonce={nonce}", app.ws_url(sale));
    tokio::spawn(async move { RoomClient::join(&url).await.expect("joins") })
}

#[sqlx::test(migrations = "../migrations")]
async fn joins_that_arrive_during_a_batch_share_the_next_in_arrival_order_and_each_proves_its_own(
    db: sqlx::PgPool,
) {
    let proxy = ChaosProxy::start(floodgate_tests::redis_addr()).await;
    let app = TestApp::spawn_with(
        db,
        TestOptions {
            gateway_redis_url: Some(format!("redis://{}", proxy.addr)),
            ..TestOptions::default()
        },
    )
    .await;
    let sale = unique("batches-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(8),
            ..SaleSpec::default()
        },
    )
    .await;
    // A second gateway, on Redis directly: its joins are not held up.
    let other = GatewayProcess::spawn(&app, &unique("gw-"), &GatewayTimings::default()).await;

    let first = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    assert_eq!(first.ticket, 1, "a lone join is sent at once, alone");

    // A batch goes out and its answer is held: it is in flight.
    proxy.hold();
    let in_flight_nonce = hex::encode(rand::random::<[u8; 16]>());
    let held = join_with_nonce(&app, &sale, &in_flight_nonce);
    eventually("the held batch took its ticket", WAIT, || async {
        (ticket_sequence(&app, &sale).await == 2).then_some(())
    })
    .await;

    // Joins arrive one after the other while it is in flight: they gather for the next batch.
    let nonces: Vec<String> = (0..GATHERED)
        .map(|_| hex::encode(rand::random::<[u8; 16]>()))
        .collect();
    let mut gathered = Vec::new();
    for (i, nonce) in nonces.iter().enumerate() {
        gathered.push(join_with_nonce(&app, &sale, nonce));
        eventually("the join reached its batch", WAIT, || async {
            (in_flight(&app).await == i + 2).then_some(())
        })
        .await;
    }
    // A join at another gateway after all of them goes first: arrivals at different gateways
    // are ordered to within one batch's round trip, not exactly (protocol.md 1.6).
    let overtaker = RoomClient::join(&other.ws_url(&sale)).await.expect("joins");
    assert_eq!(overtaker.ticket, 3);
    proxy.release();

    let held = held.await.unwrap();
    assert_eq!(
        (held.ticket, held.draw_nonce.as_deref()),
        (2, Some(in_flight_nonce.as_str()))
    );
    let mut clients = Vec::new();
    for (i, client) in gathered.into_iter().enumerate() {
        let client = client.await.unwrap();
        assert_eq!(
            (client.ticket, client.draw_nonce.as_deref()),
            (4 + i as u64, Some(nonces[i].as_str())),
            "arrival order is ticket order inside a batch"
        );
        clients.push(client);
    }
    // A join after every earlier one was answered comes after all of them.
    let after = RoomClient::join(&app.ws_url(&sale)).await.expect("joins");
    assert_eq!(after.ticket, 4 + GATHERED as u64);

    // The published record: one batch for the joins that gathered, with one root, and each
    // client inside it finds its nonce and proves it went into that root.
    let page = get_json(
        &app,
        &format!("/v1/sales/{sale}/draw/batches?from=1&count=100"),
    )
    .await;
    let (_, shape) = verifier::recompute(&page);
    assert_eq!(
        shape,
        vec![(1, 1), (2, 1), (3, 1), (4, GATHERED as u64), (24, 1)],
        "{page}"
    );
    for (client, nonce) in clients.iter().zip(&nonces) {
        let proof = get_json(
            &app,
            &format!("/v1/sales/{sale}/draw/proof?ticket={}", client.ticket),
        )
        .await;
        assert!(
            !proof["path"].as_array().unwrap().is_empty(),
            "a leaf among 20 has siblings to prove: {proof}"
        );
        let batch = verifier::check_proof(&proof, client.ticket, nonce);
        assert_eq!(batch, (4, GATHERED as u64));
    }

    // After the draw anyone recomputes every batch and the digest, and the draw seed from it.
    let draw_url = format!("/v1/sales/{sale}/draw");
    let drawn = eventually("the draw", WAIT, || async {
        Some(get_json(&app, &draw_url).await).filter(|d| d["status"] == "drawn")
    })
    .await;
    assert_eq!(drawn["prequeue_size"], 4 + GATHERED as u64);
    let page = get_json(
        &app,
        &format!("/v1/sales/{sale}/draw/batches?from=1&count=100"),
    )
    .await;
    let (chain, _) = verifier::recompute(&page);
    assert_eq!(drawn["prequeue_digest"], chain.as_str(), "{drawn}");
    let secret = verifier::hash32(drawn["secret_seed"].as_str().unwrap());
    assert_eq!(
        drawn["draw_seed"],
        hex::encode(floodgate_protocol::lottery::draw_seed(&secret, &chain)).as_str()
    );
}
