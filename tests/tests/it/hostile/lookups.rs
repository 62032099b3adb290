//! Asking about sales: a sale open on the gateway is answered from memory, and any other (a
//! made-up id reads the sale's slot in Redis to find out) is held to its address's allowance.

use floodgate_tests::client::RoomClient;
use floodgate_tests::{eventually, TestApp, TestOptions};

const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Made-up sale ids, asked for their figures and their seat counts, each read the sale's slot
/// in Redis (in a cluster, one id in 16,384 lands on the sale's own primary): past the
/// address's allowance of such lookups they are refused 429 `sale_lookup_rate_limited` before
/// any read, while a sale open on the gateway is still answered to the same address (from its
/// room's view). Before, every one was read in Redis and answered 404.
#[sqlx::test(migrations = "../migrations")]
async fn made_up_sales_are_held_to_their_addresss_allowance_and_a_live_one_is_not(
    db: sqlx::PgPool,
) {
    let options = TestOptions {
        challenges_per_sec_per_ip: 1,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = app.pending_sale("lookups-").await;
    // Someone in line: the gateway runs the sale's room.
    let _person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let http = reqwest::Client::new();
    let answer = |path: String| {
        let http = http.clone();
        let url = format!("http://{}{path}", app.gateway);
        async move {
            let answer = http.get(url).send().await.unwrap();
            let status = answer.status().as_u16();
            let body: serde_json::Value = answer.json().await.unwrap_or_default();
            (status, body["error"].as_str().unwrap_or("").to_owned())
        }
    };
    for path in ["", "/seats.json"] {
        let mut answers = Vec::new();
        for i in 0..6 {
            answers.push(answer(format!("/v1/sales/made-up-{i}{path}")).await);
        }
        let limited = answers
            .iter()
            .filter(|a| *a == &(429, "sale_lookup_rate_limited".to_owned()))
            .count();
        assert!(limited >= 3, "{path}: {answers:?}");
        assert!(
            answers
                .iter()
                .all(|(s, e)| *s == 429 || (*s == 404 && e == "unknown_sale")),
            "{answers:?}"
        );
    }
    // Many at once for one made-up id, from another address: each is a read of Redis, each is
    // held to the allowance (before, those that waited behind the first went unguarded).
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().ok())
        .build()
        .unwrap();
    let url = format!("http://{}/v1/sales/made-up-at-once/seats.json", app.gateway);
    let asks = (0..10).map(|_| other.get(&url).send());
    let statuses: Vec<u16> = futures::future::join_all(asks)
        .await
        .into_iter()
        .map(|answer| answer.unwrap().status().as_u16())
        .collect();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert!(limited >= 7, "{statuses:?}");
    // Once the room has read its view: answered from it, however often (the address's
    // allowance, one a second, is spent).
    let live = format!("/v1/sales/{sale}");
    eventually("the live sale is answered", WAIT, || async {
        answer(live.clone()).await.0 == 200
    })
    .await;
    for _ in 0..5 {
        let (status, error) = answer(live.clone()).await;
        assert_eq!((status, error.as_str()), (200, ""), "the live sale");
    }
}
