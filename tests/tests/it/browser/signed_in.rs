//! A signed-in buyer in Chromium: past the bot check, one place in two tabs, booked and paid.

use super::*;

/// Lets a `signin.mjs` journey, waiting in a paused queue, go on: admission resumes, asha books
/// and pays in the page, which ends signed in as her with the booking confirmed, and PostgreSQL
/// has the booking under her name (the buyer the booking service took from her identity token).
pub(super) async fn asha_books_and_pays(app: &TestApp, sale: &str, mut node: Dialogue) {
    app.admission(sale, "resume").await;
    node.go().await;
    let done = node
        .report(Duration::from_secs(90), "the booking completes in time")
        .await;
    node.finished().await;
    assert!(
        done["signedIn"].as_str().unwrap().contains("asha"),
        "{done}"
    );
    assert!(
        done["result"].as_str().unwrap().contains("confirmed"),
        "{done}"
    );
    eventually(
        "asha's booking is confirmed",
        Duration::from_secs(30),
        || async { confirmed_buyer(&app.db, sale).await.as_deref() == Some("asha") },
    )
    .await;
}

/// The buyer of `sale`'s confirmed booking in PostgreSQL, once there is one.
pub(crate) async fn confirmed_buyer(db: &sqlx::PgPool, sale: &str) -> Option<String> {
    let buyer: Option<Option<String>> = sqlx::query_scalar(
        "select buyer from bookings where sale_id = $1 and status = 'CONFIRMED'",
    )
    .bind(sale)
    .fetch_optional(db)
    .await
    .unwrap();
    buyer.flatten()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_signed_in_buyer_joins_past_the_bot_check_holds_one_place_in_two_tabs_and_books(
    db: sqlx::PgPool,
) {
    use floodgate_protocol::settings::{ChallengeRule, Door, IdentityRule};
    let spec = SaleSpec {
        opens_in: Duration::from_millis(1_000),
        door: Door {
            identity: IdentityRule::Required,
            challenge: ChallengeRule::Pow,
            pow_difficulty: 10,
            max_seats_per_buyer: Some(4),
            ..Door::default()
        },
        ..SaleSpec::default()
    };
    let (site, app, sale) = published_sale(db, "signin-", spec).await;
    // Two signed-in buyers ahead, in a queue that holds still.
    app.admission(&sale, "pause").await;
    app.until_open(&sale).await;
    let mut ahead = Vec::new();
    for name in ["ahead-1", "ahead-2"] {
        let identity = app.identity(name).await;
        let answer = floodgate_protocol::challenge::ProofOfWork::solve(
            &serde_json::from_value(
                app.get_json(&format!("http://{}/v1/sales/{sale}/challenge", app.gateway))
                    .await,
            )
            .unwrap(),
        );
        let url = format!("{}&challenge={answer}", app.ws_url(&sale));
        ahead.push(
            RoomClient::join_with(&url, &[("floodgate-identity", &identity)])
                .await
                .unwrap(),
        );
    }

    let mut node = Dialogue::start("signin.mjs", &page_url(&app, &sale));
    let placed = node
        .report(
            Duration::from_secs(60),
            "the buyer signs in and joins in time",
        )
        .await;
    assert_eq!(placed["first"]["ticket"], 3, "{placed}");
    assert_eq!(placed["first"]["position"], 3, "{placed}");
    assert_eq!(
        placed["second"], placed["first"],
        "one place per buyer: {placed}"
    );
    // Three tickets in all: the second tab took asha's back.
    assert_eq!(app.redis_int(&app.keys.sale(&sale).seq()).await, 3);

    asha_books_and_pays(&app, &sale, node).await;
    assert!(browser_dir()
        .join("artifacts/signin-3-second-tab.png")
        .exists());
    drop(site);
}
