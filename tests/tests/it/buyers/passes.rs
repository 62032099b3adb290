//! The pass bound to its buyer (the booking names them) and the per-buyer seat limit under concurrent requests.

use super::*;

#[sqlx::test(migrations = "../migrations")]
async fn the_pass_is_bound_to_its_buyer_and_the_booking_names_them(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = open_sale(&app, door(IdentityRule::Required), 300).await;
    let alice = app.identity("alice").await;
    let bob = app.identity("bob").await;
    let token = admitted(&app, &sale, &alice).await;
    let claims = app.signer.verifier().verify(&token, 0).unwrap();
    assert_eq!(claims.buyer.as_deref(), Some("alice"));

    // The pass, stolen by bob (or by someone not signed in at all), is refused.
    let as_bob = app.booking_client().signed_in(&bob);
    let stolen = as_bob.reserve(&sale, &token, &unique("k"), "p1", 1).await;
    floodgate_tests::assert_refused(stolen, 403, "buyer_mismatch");
    let anonymous = app.reserve(&sale, &token, &unique("k"), "p1", 1).await;
    floodgate_tests::assert_refused(anonymous, 401, "identity_required");

    let as_alice = app.booking_client().signed_in(&alice);
    let held = as_alice
        .reserve(&sale, &token, &unique("k"), "p1", 2)
        .await
        .expect("alice reserves with her own pass");
    let id = held.reservation_id.clone();
    app.pay(&sale, &id, &held.secret, "succeed").await;

    // The durable record and every event name her.
    eventually(
        "the booking is confirmed",
        Duration::from_secs(20),
        || async { app.bookings(&sale, "CONFIRMED").await == 1 },
    )
    .await;
    let buyer: Option<String> =
        sqlx::query_scalar("select buyer from bookings where reservation_id = $1")
            .bind(&id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(buyer.as_deref(), Some("alice"));
    let events = events_of(&app, &sale, 2).await;
    assert!(events
        .iter()
        .all(|e| e.event.data().buyer.as_deref() == Some("alice")));

    // She can list her own reservations; bob sees none of hers.
    let mine = as_alice.my_reservations(&sale).await.unwrap();
    assert_eq!(mine.reservations.len(), 1);
    assert_eq!(mine.reservations[0].reservation_id, id);
    assert_eq!(mine.reservations[0].seats, 2);
    assert!(as_bob
        .my_reservations(&sale)
        .await
        .unwrap()
        .reservations
        .is_empty());
    let nobody = app.booking_client().my_reservations(&sale).await;
    floodgate_tests::assert_refused(nobody, 401, "identity_required");
}

#[sqlx::test(migrations = "../migrations")]
async fn the_per_buyer_limit_holds_under_concurrent_requests_and_frees_with_expiry(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let limited = Door {
        max_seats_per_buyer: Some(3),
        ..door(IdentityRule::Required)
    };
    let sale = open_sale(&app, limited, 3).await;
    let carol = app.identity("carol").await;
    let as_carol = app.booking_client().signed_in(&carol);
    // Ten passes for carol's places (as gateways issue them over time), all used at once.
    let tokens: Vec<String> = (1..=10)
        .map(|ticket| app.buyer_token(&sale, ticket, 1, 120_000, Some("carol")))
        .collect();
    let keys: Vec<String> = tokens.iter().map(|_| unique("k")).collect();
    let answers = futures::future::join_all(
        tokens
            .iter()
            .zip(&keys)
            .map(|(t, k)| as_carol.reserve(&sale, t, k, "p1", 1)),
    )
    .await;
    let granted = answers.iter().filter(|a| a.is_ok()).count();
    let over = answers
        .iter()
        .filter(|a| matches!(a, Err(f) if f.status() == 409 && f.code() == "buyer_limit"))
        .count();
    assert_eq!((granted, over), (3, 7), "{answers:?}");
    // A refused pass is not spent; once carol's holds lapse unpaid, their seats are hers to
    // hold again.
    let refused = tokens
        .iter()
        .zip(&answers)
        .find(|(_, a)| a.is_err())
        .map(|(t, _)| t.clone())
        .unwrap();
    eventually(
        "the lapsed holds no longer count",
        Duration::from_secs(20),
        || {
            let (as_carol, refused, sale) = (as_carol.clone(), refused.clone(), sale.clone());
            async move {
                as_carol
                    .reserve(&sale, &refused, &unique("k"), "p1", 1)
                    .await
                    .is_ok()
            }
        },
    )
    .await;
}

/// A genuine pass bound to its buyer, sent by a stranger with forged identity tokens: each
/// identity's signature is checked only within the pass's own allowance (2 a second here, in
/// bursts of 4), so one pass cannot have the booking service verify signatures as fast as it is
/// sent. Before, every copy was checked: 401 `identity_invalid` each time.
#[sqlx::test(migrations = "../migrations")]
async fn forged_identities_with_a_genuine_pass_are_checked_at_the_passs_rate(db: sqlx::PgPool) {
    let options = floodgate_tests::TestOptions {
        reservations_per_sec_per_pass: 2,
        ..floodgate_tests::TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = open_sale(&app, door(IdentityRule::Required), 300).await;
    let alice = app.identity("alice").await;
    let token = admitted(&app, &sale, &alice).await;
    let forged = floodgate_tests::with_a_wrong_signature(&alice);
    let stranger = app.booking_client().signed_in(&forged);
    let mut codes = Vec::new();
    for _ in 0..12 {
        match stranger.reserve(&sale, &token, &unique("k"), "p1", 1).await {
            Err(floodgate_client::booking::Failure::Refused { body, .. }) => codes.push(body.error),
            other => panic!("{other:?}"),
        }
    }
    let checked = codes.iter().filter(|c| *c == "identity_invalid").count();
    assert!(checked <= 5, "{codes:?}");
    assert!(
        codes.iter().any(|c| c == "reservation_rate_limited"),
        "{codes:?}"
    );
}

/// A signed-in buyer's list of their reservations is a query of PostgreSQL each, whose few
/// connections the booking service's other work (its health for the autopilot among it) needs
/// too: it is held to the buyer's own allowance (made 1 a second here, 2 at once), whatever
/// address it comes from, 429 `holder_rate_limited` past it; another buyer still lists theirs.
/// Before, only the address's allowance of reads (1,000 a second) held it.
#[sqlx::test(migrations = "../migrations")]
async fn a_buyers_list_is_held_to_the_buyers_own_allowance(db: sqlx::PgPool) {
    let options = floodgate_tests::TestOptions {
        holder_requests_per_sec: 1,
        ..floodgate_tests::TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = open_sale(&app, door(IdentityRule::Required), 300).await;
    let alice = app.identity("alice").await;
    let as_alice = app.booking_client().signed_in(&alice);
    let mut refused = 0;
    // One allowance whatever sale the list names: a made-up sale id for each ask (none of
    // which need exist: an ended sale's bookings are listed too) gets no fresh one. Before, the
    // allowance was the buyer's in each sale, and made-up ids gave as many as were asked for.
    for n in 0..6 {
        let named = if n % 2 == 0 {
            sale.clone()
        } else {
            floodgate_tests::unique("made-up-")
        };
        let listed = as_alice.my_reservations(&named).await;
        if listed.is_err() {
            floodgate_tests::assert_refused(listed, 429, "holder_rate_limited");
            refused += 1;
        }
    }
    assert!(refused >= 3, "{refused} of 6 refused");
    let bob = app.identity("bob").await;
    let theirs = app
        .booking_client()
        .signed_in(&bob)
        .my_reservations(&sale)
        .await;
    assert!(theirs.is_ok(), "{theirs:?}");
}
