//! A buyer's place in line across a failover (docs/protocol.md 1.12: one place per buyer per
//! sale). Joins do not wait for a replica, so the buyer's record (`{b:<sale>/<buyer>}:rec`, the
//! index from a buyer to their ticket) can be missing from the replica promoted in its primary's
//! place. A buyer still connected keeps their ticket in the sale's slot; once the gateway sees
//! the record's primary change, it writes the record again from that session, so the buyer's
//! next connection takes the same place back instead of a second one at the back.
//!
//! The lost writes are made the way `lost_writes.rs` makes them: the records are changed to what
//! the promoted replica would hold (one missing, one naming the buyer's earlier, dead ticket)
//! before the primary dies, so the change replicates and no rebuild can run before the loss.

use floodgate_protocol::identity::BuyerId;
use floodgate_protocol::settings::{Door, IdentityRule};
use floodgate_tests::client::RoomClient;

use super::*;

async fn join_as(app: &TestApp, sale: &str, identity: &str) -> RoomClient {
    RoomClient::join_with(&app.ws_url(sale), &[("floodgate-identity", identity)])
        .await
        .unwrap_or_else(|r| panic!("joining as a buyer: {r:?}"))
}

async fn recorded_ticket(app: &TestApp, record: &str) -> Option<u64> {
    redis::cmd("HGET")
        .arg(record)
        .arg("ticket")
        .query_async(&mut app.redis.clone())
        .await
        .unwrap()
}

/// Whether `ticket`'s grace has run out (Redis' clock decides, as resume.lua does).
async fn dead(app: &TestApp, sale: &str, ticket: u64) -> bool {
    let deadline: Option<f64> = redis::cmd("ZSCORE")
        .arg(app.keys.sale(sale).gone())
        .arg(ticket)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    deadline.is_some_and(|d| (d as i64) < floodgate_protocol::now_millis())
}

/// A buyer other than `first` whose record lives on the same primary as `first`'s, so one
/// failover loses both.
async fn neighbour(cluster: &PrivateCluster, app: &TestApp, sale: &str, first: &str) -> String {
    let primary = cluster
        .primary(&app.keys.buyer(sale, &BuyerId::new(first)))
        .await;
    for n in 0..200 {
        let name = format!("carol-{n}");
        if cluster
            .primary(&app.keys.buyer(sale, &BuyerId::new(&*name)))
            .await
            == primary
        {
            return name;
        }
    }
    panic!("no buyer name lands on {primary}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyers_place_lost_in_a_failover_is_written_again_from_their_live_session() {
    let cluster = PrivateCluster::start();
    let (_url, db) = fresh_database().await;
    let options = TestOptions {
        redis_cluster: Some(cluster.seeds.clone()),
        grace_ms: 300,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("places-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3600),
        door: Door {
            identity: IdentityRule::Required,
            ..Door::default()
        },
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    let carol_name = neighbour(&cluster, &app, &sale, "alice").await;
    let (alice, carol) = (app.identity("alice").await, app.identity(&carol_name).await);
    let alice_record = app.keys.buyer(&sale, &BuyerId::new("alice"));
    let carol_record = app.keys.buyer(&sale, &BuyerId::new(&*carol_name));

    // Alice gave up a first place, then took a second one, where she waits.
    let given_up = join_as(&app, &sale, &alice).await;
    let given_up_ticket = given_up.ticket;
    given_up.leave().await;
    eventually("her first place is dead", WAIT, || {
        dead(&app, &sale, given_up_ticket)
    })
    .await;
    let alice_now = join_as(&app, &sale, &alice).await;
    assert!(alice_now.ticket > given_up_ticket && !alice_now.resumed);
    // Carol waits too.
    let carol_now = join_as(&app, &sale, &carol).await;
    assert_eq!(
        recorded_ticket(&app, &alice_record).await,
        Some(alice_now.ticket)
    );
    assert_eq!(
        recorded_ticket(&app, &carol_record).await,
        Some(carol_now.ticket)
    );

    // The last writes of their records are lost: the replica that will be promoted had Carol's
    // not at all, and Alice's from before her second place (it names her dead ticket).
    let mut conn = app.redis.clone();
    let _: i64 = redis::cmd("DEL")
        .arg(&carol_record)
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: i64 = redis::cmd("HSET")
        .arg(&alice_record)
        .arg("ticket")
        .arg(given_up_ticket)
        .query_async(&mut conn)
        .await
        .unwrap();

    // Their records' primary dies and its replica takes over.
    let dead_node = cluster.primary(&alice_record).await;
    cluster.kill(dead_node);
    let promoted = cluster.failed_over(&alice_record, dead_node).await;
    assert_ne!(promoted, dead_node);
    cluster.restart(dead_node);

    // The gateway writes both records again from the buyers' live sessions.
    eventually("both records name the live places", WAIT, || async {
        recorded_ticket(&app, &alice_record).await == Some(alice_now.ticket)
            && recorded_ticket(&app, &carol_record).await == Some(carol_now.ticket)
    })
    .await;
    // So their next connections take those places back rather than new ones at the back.
    let issued = app.redis_int(&app.keys.sale(&sale).seq()).await;
    let alice_again = join_as(&app, &sale, &alice).await;
    let carol_again = join_as(&app, &sale, &carol).await;
    assert_eq!(
        (alice_again.ticket, carol_again.ticket),
        (alice_now.ticket, carol_now.ticket),
        "their live places"
    );
    assert!(alice_again.resumed && carol_again.resumed);
    assert_eq!(
        app.redis_int(&app.keys.sale(&sale).seq()).await,
        issued,
        "no new ticket was taken"
    );
    drop((alice_now, carol_now, alice_again, carol_again));
}
