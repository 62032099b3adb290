//! What docs/protocol.md 1.12 says of a signed-in buyer's several sessions and of a pass once it
//! is spent, and of the sign-in stand-in's API for scripts (the sandbox section), each as the
//! services do it.

use std::time::Duration;

use floodgate_protocol::settings::{Door, IdentityRule};
use floodgate_protocol::ws::ServerMessage;
use floodgate_tests::client::{Heard, RoomClient};
use floodgate_tests::{unique, TestApp};

use super::{join_as, open_sale};

/// The admission token a session hears, skipping what comes before it.
async fn token_heard(client: &mut RoomClient) -> String {
    loop {
        match client.next(Duration::from_secs(20)).await {
            Heard::Message(ServerMessage::Admitted { token, .. }) => return token,
            Heard::Message(_) => continue,
            other => panic!("expected admission, got {other:?}"),
        }
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn every_session_of_a_buyer_is_admitted_and_a_spent_pass_stays_spent_until_it_expires(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let door = Door {
        identity: IdentityRule::Required,
        max_seats_per_buyer: Some(4),
        ..Door::default()
    };
    let sale = open_sale(&app, door, 300).await;
    let alice = app.identity("alice").await;

    // Two tabs: one place, and both sessions are told `admitted`, with the same pass.
    let (mut tab, mut other_tab) =
        tokio::join!(join_as(&app, &sale, &alice), join_as(&app, &sale, &alice));
    assert_eq!(tab.ticket, other_tab.ticket);
    let (first, second) = tokio::join!(token_heard(&mut tab), token_heard(&mut other_tab));
    // Each session's copy is signed when it is sent; the pass is the same: its id and expiry.
    let pass = |token: &str| {
        let claims = app.signer.verifier().verify(token, 0).unwrap();
        (claims.jti, claims.exp_ms)
    };
    assert_eq!(pass(&first), pass(&second), "one place, one pass");

    let as_alice = app.booking_client().signed_in(&alice);
    as_alice
        .reserve(&sale, &first, &unique("k"), "p1", 2)
        .await
        .expect("alice reserves two of her four seats");

    // Joining again while the pass is current gives the same place and the same pass, now
    // spent: more seats within her limit wait for the pass to expire and a new place.
    let mut again = join_as(&app, &sale, &alice).await;
    assert!(again.resumed && again.ticket == tab.ticket);
    let same = token_heard(&mut again).await;
    assert_eq!(pass(&same), pass(&first));
    let more = as_alice.reserve(&sale, &same, &unique("k"), "p1", 1).await;
    floodgate_tests::assert_refused(more, 409, "token_spent");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_sign_in_stand_in_answers_scripts_as_the_protocol_says(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let url = format!("http://{}/v1/identity/tokens", app.sandbox);
    let answer = app
        .http
        .post(&url)
        .json(&serde_json::json!({ "sub": "asha" }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["token_type"], "Bearer");
    let token = body["id_token"].as_str().expect("an id_token");
    // A genuine identity token for this deployment: a join with it takes a place.
    let sale = super::pending_sale(
        &app,
        Door {
            identity: IdentityRule::Required,
            ..Door::default()
        },
    )
    .await;
    assert!(join_as(&app, &sale, token).await.ticket > 0);

    for bad in [serde_json::json!({}), serde_json::json!({ "sub": "" })] {
        let refused = app.http.post(&url).json(&bad).send().await.unwrap();
        assert_eq!(refused.status().as_u16(), 422, "{bad}");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{bad}");
    }
}
