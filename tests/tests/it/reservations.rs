//! Reservations under contention, against the real booking service, Redis, broker and database.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_tests::{eventually, unique, Answer, SaleSpec, TestApp};

const SEATS: u32 = 500;
const ATTEMPTS: usize = 2_000;
/// Every fourth attempt is sent twice at once, with the same key and body (a client's retry
/// racing its own first try).
const DUPLICATE_EVERY: usize = 4;

// Multi-threaded: 2,500 requests in flight plus the services themselves need both cores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_concurrent_attempts_take_exactly_five_hundred_seats() {
    let db = floodgate_tests::fresh_db().await;
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("rush-");
    app.create_sale(
        &sale,
        &SaleSpec {
            pools: vec![("p1".into(), SEATS)],
            ..SaleSpec::default()
        },
    )
    .await;
    let attempts: Vec<(usize, String, String)> = (0..ATTEMPTS)
        .map(|i| {
            (
                i,
                app.token(&sale, i as u64 + 1, 1, 60_000),
                uuid::Uuid::new_v4().to_string(),
            )
        })
        .collect();
    let requests = attempts.iter().flat_map(|(i, token, key)| {
        let copies = if i % DUPLICATE_EVERY == 0 { 2 } else { 1 };
        (0..copies).map(move |_| (*i, token, key))
    });
    let answers = futures::future::join_all(requests.map(|(i, token, key)| {
        let (app, sale) = (&app, &sale);
        async move { (i, app.reserve(sale, token, key, "p1", 1).await) }
    }))
    .await;

    let mut by_attempt: HashMap<usize, Vec<Answer<ReservationCreated>>> = HashMap::new();
    for (i, answer) in answers {
        by_attempt.entry(i).or_default().push(answer);
    }
    let mut reservations = HashSet::new();
    for (i, answers) in &by_attempt {
        // A duplicate gets exactly the original answer: the same 201 body, or the same refusal.
        assert!(
            answers.windows(2).all(|w| w[0] == w[1]),
            "attempt {i} got different answers: {answers:?}"
        );
        match &answers[0] {
            Ok(created) => {
                reservations.insert(created.reservation_id.clone());
            }
            Err(refused) => assert_eq!(
                (refused.status(), refused.code()),
                (409, "sold_out"),
                "attempt {i}: {refused}"
            ),
        }
    }
    assert_eq!(by_attempt.len(), ATTEMPTS);
    assert_eq!(
        reservations.len(),
        SEATS as usize,
        "exactly one hold per seat"
    );

    let pool = app.keys.pool(&sale, "p1");
    let (available, held, sold) = (
        app.redis_int(&pool.available()).await,
        app.redis_int(&pool.held()).await,
        app.redis_int(&pool.sold()).await,
    );
    assert_eq!((available, held, sold), (0, SEATS as i64, 0));
    assert_eq!(
        available + held + sold,
        SEATS as i64,
        "available + held + sold = capacity"
    );

    let count = || async {
        sqlx::query_scalar::<_, i64>(
            "select count(*) from bookings where sale_id = $1 and status = 'PENDING_PAYMENT'",
        )
        .bind(&sale)
        .fetch_one(&db)
        .await
        .unwrap()
    };
    eventually("every 201 persisted", Duration::from_secs(60), || async {
        count().await == SEATS as i64
    })
    .await;
    let persisted: HashSet<String> =
        sqlx::query_scalar("select reservation_id from bookings where sale_id = $1")
            .bind(&sale)
            .fetch_all(&db)
            .await
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(persisted, reservations, "the rows are exactly the 201s");
}
