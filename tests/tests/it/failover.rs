//! A Redis primary killed (`kill -9`) in the middle of a sale on a Redis Cluster, once the one
//! that holds a pool and once the one that holds the sale's slot (its claims, frontier and
//! lease). Writes are promised only once a replica has them (`WAIT`, platform/src/replicas.rs),
//! so after the failover nothing answered 201 is missing, no paid seat is lost, no seat is sold
//! twice, and reconciliation finds nothing to say. Each run has its own cluster, on free ports.
//! [`passes`]: people retrying through the failover as the protocol says keep their pass.
//! [`replays`]: every 201, a replay's and a buyer's included, waits for its replica.
//! [`places`]: a buyer's place in line whose record a failover lost is written again.
//! [`readiness`]: a primary slow, then dead, under a rush through the edge: every Pod stays
//! ready, and only its slot is refused.

mod passes;
mod places;
mod readiness;
mod replays;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_protocol::api::code;
use floodgate_tests::redis_cluster::PrivateCluster;
use floodgate_tests::{
    binary, eventually, fresh_database, kafka_brokers, unique, SaleSpec, TestApp, TestOptions,
};

const POOLS: [&str; 2] = ["p1", "p2"];
const CAPACITY: i64 = 30;
const WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
enum Victim {
    /// The primary of pool p1's slot.
    Pool,
    /// The primary of the sale's slot.
    Sale,
}

/// What the buyers were told: every 201 (pool, reservation id) and every payment the provider
/// took.
#[derive(Default)]
struct Told {
    reserved: Vec<(String, String)>,
    paid: Vec<String>,
}

/// Buyers reserving one seat each, alternating pools, paying for every third hold, until both
/// pools say sold out or `stop` is set. Refusals other than sold out (503 while a primary is
/// being replaced) are retried with a fresh request.
async fn buyers(app: Arc<TestApp>, sale: String, told: Arc<Mutex<Told>>, stop: Arc<AtomicBool>) {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (app, sale, told, stop, next) = (
            app.clone(),
            sale.clone(),
            told.clone(),
            stop.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut sold_out = [false; 2];
            while !stop.load(Ordering::SeqCst) && !sold_out.iter().all(|s| *s) {
                let ticket = next.fetch_add(1, Ordering::SeqCst) + 1;
                let which = (ticket as usize) % 2;
                let which = if sold_out[which] { 1 - which } else { which };
                let pool = POOLS[which];
                let token = app.token(&sale, ticket, 1, 120_000);
                match app
                    .reserve(&sale, &token, &format!("k{ticket}"), pool, 1)
                    .await
                {
                    Ok(hold) => {
                        told.lock()
                            .unwrap()
                            .reserved
                            .push((pool.into(), hold.reservation_id.clone()));
                        if ticket % 3 == 0 {
                            pay(&app, &sale, &hold.reservation_id, &hold.secret, &told).await;
                        }
                    }
                    Err(refused) if refused.code() == code::SOLD_OUT => sold_out[which] = true,
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Starts a payment and completes it at the provider; recorded once the provider took it (the
/// provider then delivers its webhook until it is acknowledged).
async fn pay(app: &TestApp, sale: &str, id: &str, secret: &str, told: &Mutex<Told>) {
    for _ in 0..40 {
        if let Ok(started) = app.booking_client().start_payment(sale, id, secret).await {
            let checkout = serde_json::json!({ "outcome": "succeed" });
            floodgate_client::booking::sandbox_checkout(
                &app.http,
                app.sandbox,
                &started.payment_id,
                &checkout,
            )
            .await
            .expect("the sandbox takes the checkout");
            told.lock().unwrap().paid.push(id.to_owned());
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn statuses(db: &sqlx::PgPool, sale: &str) -> BTreeMap<String, (String, String)> {
    sqlx::query_as::<_, (String, String, String)>(
        "select reservation_id, pool_id, status from bookings where sale_id = $1",
    )
    .bind(sale)
    .fetch_all(db)
    .await
    .unwrap()
    .into_iter()
    .map(|(id, pool, status)| (id, (pool, status)))
    .collect()
}

/// The app on `cluster` with a sale of `pools` (id and seats) open: the app and the sale.
async fn open_on(
    cluster: &PrivateCluster,
    db: sqlx::PgPool,
    prefix: &str,
    pools: &[(&str, u32)],
) -> (Arc<TestApp>, String) {
    let options = TestOptions {
        redis_cluster: Some(cluster.seeds.clone()),
        ..TestOptions::default()
    };
    let app = Arc::new(TestApp::spawn_with(db, options).await);
    let sale = unique(prefix);
    let spec = SaleSpec {
        pools: pools.iter().map(|(p, c)| (p.to_string(), *c)).collect(),
        opens_in: Duration::from_millis(500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    (app, sale)
}

/// `kill -9` of the primary serving `victim`'s slot (pool p1's, or the sale's), once another
/// node has taken its place; the dead node then comes back as the replica of its successor, so
/// writes can be replicated again.
async fn lose_the_primary_of(cluster: &PrivateCluster, app: &TestApp, sale: &str, victim: Victim) {
    let key = match victim {
        Victim::Pool => app.keys.pool(sale, "p1").config(),
        Victim::Sale => app.keys.sale(sale).meta(),
    };
    let dead = cluster.primary(&key).await;
    cluster.kill(dead);
    let promoted = cluster.failed_over(&key, dead).await;
    assert_ne!(promoted, dead);
    cluster.restart(dead);
}

async fn a_sale_survives_the_loss_of(victim: Victim) {
    let cluster = PrivateCluster::start();
    let (url, db) = fresh_database().await;
    let pools: Vec<_> = POOLS.iter().map(|p| (*p, CAPACITY as u32)).collect();
    let (app, sale) = open_on(&cluster, db.clone(), "failover-", &pools).await;

    let told = Arc::new(Mutex::new(Told::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(buyers(
        app.clone(),
        sale.clone(),
        told.clone(),
        stop.clone(),
    ));

    // Mid-sale, the victim's primary dies without a word.
    eventually("the sale is under way", WAIT, || async {
        told.lock().unwrap().reserved.len() >= 10
    })
    .await;
    lose_the_primary_of(&cluster, &app, &sale, victim).await;

    let finished = tokio::time::timeout(Duration::from_secs(120), load).await;
    stop.store(true, Ordering::SeqCst);
    finished
        .expect("the sale sells out after the failover")
        .unwrap();
    let told = std::mem::take(&mut *told.lock().unwrap());

    // Every 201 and every payment the provider took is in PostgreSQL, as it is in Redis.
    let ok = || async {
        let rows = statuses(&db, &sale).await;
        let live = |status: &str| status == "PENDING_PAYMENT" || status == "CONFIRMED";
        told.reserved
            .iter()
            .all(|(_, id)| rows.get(id).is_some_and(|(_, s)| live(s)))
            && told
                .paid
                .iter()
                .all(|id| rows.get(id).is_some_and(|(_, s)| s == "CONFIRMED"))
    };
    eventually("every promise in PostgreSQL", WAIT, ok).await;
    let mut conn = app.redis.clone();
    for (pool, id) in &told.reserved {
        let state: Option<String> = redis::cmd("HGET")
            .arg(app.keys.pool(&sale, pool).reservation(id))
            .arg("state")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            matches!(state.as_deref(), Some("held" | "sold")),
            "{id} answered 201 is {state:?} in Redis"
        );
    }

    // No seat sold twice: each pool balances in Redis, and PostgreSQL has exactly its capacity
    // in live bookings (it sold out), no more.
    for pool in POOLS {
        let k = app.keys.pool(&sale, pool);
        let (available, held, sold) = (
            app.redis_int(&k.available()).await,
            app.redis_int(&k.held()).await,
            app.redis_int(&k.sold()).await,
        );
        assert_eq!(available + held + sold, CAPACITY, "{pool}");
        assert_eq!(available, 0, "{pool} sold out");
        // A hold whose request failed while its primary died reaches PostgreSQL through the
        // relay, after its grace period.
        eventually("PostgreSQL has exactly the capacity", WAIT, || async {
            let live = statuses(&db, &sale)
                .await
                .values()
                .filter(|(p, s)| p == pool && (s == "PENDING_PAYMENT" || s == "CONFIRMED"))
                .count() as i64;
            assert!(live <= CAPACITY, "{pool}: {live} live bookings");
            live == CAPACITY
        })
        .await;
    }

    // And reconciliation has nothing to say (the consumer may still be applying payments).
    eventually("reconciliation finds no drift", WAIT, || async {
        let output = std::process::Command::new(binary("floodgate-booking"))
            .args(["sale", "reconcile", &sale])
            .env("FLOODGATE_DATABASE_URL", &url)
            .env("FLOODGATE_REDIS_CLUSTER_NODES", cluster.seeds.join(","))
            .env("FLOODGATE_REDIS_PREFIX", app.keys.prefix())
            .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        output.status.success()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_pools_primary_mid_sale_loses_nothing() {
    a_sale_survives_the_loss_of(Victim::Pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_sale_slots_primary_mid_sale_loses_nothing() {
    a_sale_survives_the_loss_of(Victim::Sale).await;
}

/// A replica that stops acknowledging (its process stopped) while its primary goes on: a
/// reservation is not promised on the primary alone. It is answered 503 and its hold taken back,
/// and the pool sells again once the replica is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_no_replica_has_is_taken_back_not_promised() {
    let cluster = PrivateCluster::start();
    let (_url, db) = fresh_database().await;
    let options = TestOptions {
        redis_cluster: Some(cluster.seeds.clone()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("replica-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 5)],
        opens_in: Duration::from_millis(500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    app.until_open(&sale).await;
    let reserve = |ticket: u64| {
        let token = app.token(&sale, ticket, 1, 120_000);
        let app = &app;
        let sale = sale.clone();
        async move {
            app.reserve(&sale, &token, &format!("k{ticket}"), "p1", 1)
                .await
        }
    };
    reserve(1).await.expect("201 with the replica in step");

    let pool = app.keys.pool(&sale, "p1");
    let primary = cluster.primary(&pool.config()).await;
    let replica = cluster.replica_of(primary).await;
    cluster.signal(replica, "STOP");
    let refused = reserve(2).await;
    cluster.signal(replica, "CONT");
    floodgate_tests::assert_refused(refused, 503, code::REPLICA_UNAVAILABLE);
    // Taken back: the seat is free again, and the reservation is marked aborted.
    assert_eq!(app.redis_int(&pool.available()).await, 4);
    assert_eq!(app.redis_int(&pool.held()).await, 1);

    reserve(3).await.expect("201 once the replica is back");
    assert_eq!(app.redis_int(&pool.available()).await, 3);
}
