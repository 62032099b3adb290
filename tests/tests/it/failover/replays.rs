//! Every 201 is answered only once the writes it stands on are on a replica (docs/protocol.md 3,
//! "Durable"): a replay of an answered reservation on another booking instance (whose own
//! connection made no write a `WAIT` could count), and a reservation that counts seats against
//! its buyer (whose record is a slot of its own), while that replica has stopped acknowledging.

use floodgate_client::BookingClient;
use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::settings::{Door, IdentityRule};

use super::*;

async fn open_sale(app: &TestApp, door: Door) -> String {
    let sale = unique("replica-");
    open_sale_named(app, &sale, door).await;
    sale
}

async fn open_sale_named(app: &TestApp, sale: &str, door: Door) {
    let spec = SaleSpec {
        pools: vec![("p1".into(), 5)],
        opens_in: Duration::from_millis(500),
        door,
        ..SaleSpec::default()
    };
    app.create_sale(sale, &spec).await;
    app.until_open(sale).await;
}

async fn on_cluster(cluster: &PrivateCluster) -> TestApp {
    let (_url, db) = fresh_database().await;
    let options = TestOptions {
        redis_cluster: Some(cluster.seeds.clone()),
        ..TestOptions::default()
    };
    TestApp::spawn_with(db, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_201_on_another_instance_waits_for_the_replica() {
    let cluster = PrivateCluster::start();
    let app = on_cluster(&cluster).await;
    // A sale whose slot is on another primary than its pool's: the replay's own claim write on
    // the sale's primary must not be what makes a wait on the pool's primary count.
    let mut sale = unique("replica-");
    while cluster.primary(&app.keys.sale(&sale).meta()).await
        == cluster.primary(&app.keys.pool(&sale, "p1").config()).await
    {
        sale = unique("replica-");
    }
    open_sale_named(&app, &sale, Door::default()).await;
    let other = BookingClient::new(
        app.http.clone(),
        app.extra_booking(&kafka_brokers(), 10_000).await,
    );
    let token = app.token(&sale, 1, 1, 120_000);
    let first = app
        .reserve(&sale, &token, "k1", "p1", 1)
        .await
        .expect("201 with the replica in step");

    let pool = app.keys.pool(&sale, "p1");
    let primary = cluster.primary(&pool.config()).await;
    let replica = cluster.replica_of(primary).await;
    cluster.signal(replica, "STOP");
    let replayed = other.reserve(&sale, &token, "k1", "p1", 1).await;
    cluster.signal(replica, "CONT");
    floodgate_tests::assert_refused(replayed, 503, code::REPLICA_UNAVAILABLE);

    // The replica back, the same answer as the first time.
    let again = other
        .reserve(&sale, &token, "k1", "p1", 1)
        .await
        .expect("the same 201 once the replica is back");
    assert_eq!(again.reservation_id, first.reservation_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_201_waits_for_the_buyers_seat_count_on_its_replica() {
    let cluster = PrivateCluster::start();
    let app = on_cluster(&cluster).await;
    let door = Door {
        identity: IdentityRule::Required,
        max_seats_per_buyer: Some(2),
        ..Door::default()
    };
    let sale = open_sale(&app, door).await;
    // A buyer whose record is on another primary than the pool's and the sale's, so stopping its
    // replica stops nothing else.
    let pool = app.keys.pool(&sale, "p1");
    let taken = [
        cluster.primary(&pool.config()).await,
        cluster.primary(&app.keys.sale(&sale).meta()).await,
    ];
    let mut buyer = String::new();
    for n in 0.. {
        buyer = format!("buyer-{n}");
        let record = app.keys.buyer(&sale, &BuyerId::new(buyer.clone()));
        if !taken.contains(&cluster.primary(&record).await) {
            break;
        }
    }
    let record = app.keys.buyer(&sale, &BuyerId::new(buyer.clone()));
    let replica = cluster.replica_of(cluster.primary(&record).await).await;
    let signed_in = app.booking_client().signed_in(app.identity(&buyer).await);
    let pass = app.buyer_token(&sale, 1, 1, 120_000, Some(&buyer));

    cluster.signal(replica, "STOP");
    let refused = signed_in.reserve(&sale, &pass, "k1", "p1", 1).await;
    cluster.signal(replica, "CONT");
    floodgate_tests::assert_refused(refused, 503, code::REPLICA_UNAVAILABLE);

    // Taken back, not promised: the buyer's next pass gets its seat once the replica is back.
    let next = app.buyer_token(&sale, 2, 1, 120_000, Some(&buyer));
    signed_in
        .reserve(&sale, &next, "k2", "p1", 1)
        .await
        .expect("201 once the buyer's replica is back");
}
