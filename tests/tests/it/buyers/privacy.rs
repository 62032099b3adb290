//! What Floodgate keeps of a buyer: a keyed hash that names nobody if the operator asks, and nothing personal in the gateway's log or metrics.

use super::*;

#[sqlx::test(migrations = "../migrations")]
async fn buyers_can_be_kept_as_a_keyed_hash_that_names_nobody(db: sqlx::PgPool) {
    let options = floodgate_tests::TestOptions {
        buyer_id_key: Some(floodgate_tests::secret("buyer-key-")),
        ..floodgate_tests::TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = open_sale(&app, door(IdentityRule::Required), 300).await;
    let alice = app.identity("alice").await;
    let token = admitted(&app, &sale, &alice).await;
    let buyer = app
        .signer
        .verifier()
        .verify(&token, 0)
        .unwrap()
        .buyer
        .expect("the pass names its buyer");
    assert_eq!(buyer.len(), 32, "{buyer}");
    assert!(!buyer.contains("alice"), "{buyer}");
    // The booking service computes the same buyer from the same identity (same key), so her
    // pass is hers there too.
    let held = app
        .booking_client()
        .signed_in(&alice)
        .reserve(&sale, &token, &unique("k"), "p1", 1)
        .await
        .expect("alice reserves");
    eventually(
        "the booking is recorded",
        Duration::from_secs(20),
        || async {
            let stored: Option<Option<String>> =
                sqlx::query_scalar("select buyer from bookings where reservation_id = $1")
                    .bind(&held.reservation_id)
                    .fetch_optional(&app.db)
                    .await
                    .unwrap();
            stored.flatten().as_deref() == Some(buyer.as_str())
        },
    )
    .await;
}

#[sqlx::test(migrations = "../migrations")]
async fn nothing_personal_reaches_the_gateways_log_or_its_metrics(db: sqlx::PgPool) {
    use floodgate_tests::gateways::{GatewayProcess, GatewayTimings};
    let app = TestApp::spawn(db).await;
    let sale = pending_sale(&app, door(IdentityRule::Required)).await;
    let log = std::env::temp_dir().join(format!("{}.log", unique("gateway-")));
    let gateway =
        GatewayProcess::spawn_logging(&app, "gw-private", &GatewayTimings::default(), &log).await;
    let subject = unique("private-person-");
    let identity = app.identity(&subject).await;
    let url = gateway.ws_url(&sale);
    let joined = RoomClient::join_with(&url, &[("floodgate-identity", &identity)])
        .await
        .expect("the buyer joins the gateway process");
    // A refused identity is logged too (as a refusal), never with the token or a subject.
    let expired = app
        .identity_with(&serde_json::json!({ "sub": subject, "expires_in_secs": -60 }))
        .await;
    assert_eq!(
        refused(&url, &[("floodgate-identity", &expired)]).await,
        (401, "identity_expired".into())
    );
    let metrics = app
        .http
        .get(format!("http://{}/metrics", gateway.admin))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    drop(joined);
    drop(gateway);
    let logged = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(
        logged.contains("room started"),
        "the log was written: {logged}"
    );
    for private in [&subject, &identity, &expired] {
        assert!(
            !logged.contains(private.as_str()),
            "the log holds {private}"
        );
        assert!(
            !metrics.contains(private.as_str()),
            "the metrics hold {private}"
        );
    }
}
