//! Passes across a failover: people who follow docs/protocol.md through a primary's death keep
//! their pass. A 503 is retried with the same `Idempotency-Key`; once that key has a definitive
//! answer (409 `sold_out`, 404), the pass is not spent, so another class is tried with a fresh
//! key. Nobody who did that may be told `token_spent` for a pass that holds nothing, and no pass
//! may ever hold two reservations.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_client::booking::Failure;
use floodgate_protocol::api::code;
use floodgate_tests::redis_cluster::PrivateCluster;
use floodgate_tests::{eventually, fresh_database, TestApp};

use super::{lose_the_primary_of, open_on, Victim};

/// The class everyone tries first: small, so that it sells out while people are still retrying
/// the 503s of the failover.
const FIRST: (&str, u32) = ("p1", 20);
/// The class they fall back to.
const SECOND: (&str, u32) = ("p2", 40);
/// Admitted people, more than both classes hold: the sale sells out.
const PEOPLE: u64 = 90;
/// How many book at once.
const AT_ONCE: usize = 15;

/// How one person's attempt to book ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    /// A 201, in this class.
    Reserved(&'static str),
    /// Both classes sold out.
    SoldOut,
    /// Told their pass was spent, in this class, after definitive answers only.
    TokenSpent(&'static str),
    /// Anything else the protocol does not lead a careful client to expect.
    Other(String),
}

/// One admitted person following the protocol: each class in turn with a fresh key; a 503 is
/// retried with the same key after its `Retry-After`; a 409 `sold_out` moves on to the next class.
async fn book(app: &TestApp, sale: &str, token: &str) -> Ending {
    for (class, _) in [FIRST, SECOND] {
        let key = uuid::Uuid::new_v4().to_string();
        loop {
            match app.reserve(sale, token, &key, class, 1).await {
                Ok(_) => return Ending::Reserved(class),
                Err(Failure::Refused {
                    status: 503,
                    retry_after,
                    ..
                }) => {
                    let wait = Duration::from_secs(retry_after.unwrap_or(1)).min(WAIT_503);
                    tokio::time::sleep(wait).await;
                }
                Err(Failure::Unreachable(_)) => tokio::time::sleep(WAIT_503).await,
                Err(refused) if refused.code() == code::SOLD_OUT => break,
                Err(refused) if refused.code() == code::TOKEN_SPENT => {
                    return Ending::TokenSpent(class)
                }
                Err(refused) => return Ending::Other(refused.to_string()),
            }
        }
    }
    Ending::SoldOut
}

/// A retry's pause: the `Retry-After` asked for, capped so the test keeps moving.
const WAIT_503: Duration = Duration::from_secs(1);

async fn no_pass_is_spent_by_losing(victim: Victim) {
    let cluster = PrivateCluster::start();
    let (_url, db) = fresh_database().await;
    let (app, sale) = open_on(&cluster, db, "passes-", &[FIRST, SECOND]).await;

    let endings = Arc::new(Mutex::new(BTreeMap::new()));
    // Each pass's token id, by ticket: where its use is recorded.
    let jtis = Arc::new(Mutex::new(BTreeMap::new()));
    let next = Arc::new(AtomicU64::new(1));
    let mut people = Vec::new();
    for _ in 0..AT_ONCE {
        let (app, sale, endings, next, jtis) = (
            app.clone(),
            sale.clone(),
            endings.clone(),
            next.clone(),
            jtis.clone(),
        );
        people.push(tokio::spawn(async move {
            loop {
                let ticket = next.fetch_add(1, Ordering::SeqCst);
                if ticket > PEOPLE {
                    return;
                }
                let token = app.token(&sale, ticket, 1, 600_000);
                let jti = app.signer.verifier().verify(&token, 0).unwrap().jti;
                jtis.lock().unwrap().insert(ticket, jti);
                let ending = book(&app, &sale, &token).await;
                endings.lock().unwrap().insert(ticket, ending);
            }
        }));
    }

    // The first class is nearly gone when the victim's primary dies: the 503s of the failover
    // are retried while it sells out.
    let first = app.keys.pool(&sale, FIRST.0);
    eventually("the first class is selling", WAIT, || async {
        app.redis_int(&first.available()).await <= i64::from(FIRST.1) / 2
    })
    .await;
    lose_the_primary_of(&cluster, &app, &sale, victim).await;
    for person in people {
        tokio::time::timeout(Duration::from_secs(180), person)
            .await
            .expect("everyone has an answer")
            .unwrap();
    }

    let endings = std::mem::take(&mut *endings.lock().unwrap());
    let spent: Vec<_> = endings
        .iter()
        .filter(|(_, e)| matches!(e, Ending::TokenSpent(_)))
        .collect();
    let other: Vec<_> = endings
        .iter()
        .filter(|(_, e)| matches!(e, Ending::Other(_)))
        .collect();
    assert!(
        spent.is_empty() && other.is_empty(),
        "{} of {PEOPLE} people told token_spent after only 503s and sold_out ({spent:?}); \
         other answers: {other:?}",
        spent.len()
    );

    // No pass holds two reservations: each pass's live reservations over both classes.
    let mut conn = app.redis.clone();
    for ticket in 1..=PEOPLE {
        let jti = jtis.lock().unwrap()[&ticket].clone();
        let mut live = 0;
        for (class, _) in [FIRST, SECOND] {
            let pool = app.keys.pool(&sale, class);
            let id: Option<String> = redis::cmd("HGET")
                .arg(pool.token_reservation(&jti))
                .arg("id")
                .query_async(&mut conn)
                .await
                .unwrap();
            if let Some(id) = id {
                let state: Option<String> = redis::cmd("HGET")
                    .arg(pool.reservation(&id))
                    .arg("state")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                live += usize::from(matches!(state.as_deref(), Some("held" | "sold")));
            }
        }
        assert!(
            live <= 1,
            "ticket {ticket}'s pass holds {live} reservations"
        );
    }

    // Everyone who was told 201 has a seat, and every seat went to someone who asked: the sale
    // sold out with nobody stuck behind a pass the failover spent.
    let reserved = endings
        .values()
        .filter(|e| matches!(e, Ending::Reserved(_)))
        .count();
    assert_eq!(reserved as u32, FIRST.1 + SECOND.1, "{endings:?}");
    for (class, capacity) in [FIRST, SECOND] {
        let pool = app.keys.pool(&sale, class);
        let held = app.redis_int(&pool.held()).await;
        assert_eq!(app.redis_int(&pool.available()).await, 0, "{class}");
        assert_eq!(held, i64::from(capacity), "{class}");
    }
}

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_failover_spends_no_pass_that_holds_nothing() {
    no_pass_is_spent_by_losing(Victim::Pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_slots_failover_spends_no_pass_that_holds_nothing() {
    no_pass_is_spent_by_losing(Victim::Sale).await;
}
