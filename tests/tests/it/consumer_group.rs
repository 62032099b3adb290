//! The consumer group grows and shrinks (issue 15): members of one group on a topic of six
//! partitions share them, one is killed with `kill -9` in the middle of the stream and another
//! joins, and every event is applied exactly once, with the lag back to zero. The group lives in
//! PostgreSQL (consumer/src/membership.rs); the real consumer binary runs each member.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use floodgate_platform::keys::pool_partition_key;
use floodgate_protocol::events::Event;
use floodgate_tests::gateways::free_port;
use floodgate_tests::{
    binary, ensure_topics, event, eventually, fresh_database, kafka_brokers, produce, unique,
};
use sqlx::PgPool;

use crate::consumer::{assert_bookings, count};

const SALE: &str = "group-sale";
const PARTITIONS: i32 = 6;
const WAIT: Duration = Duration::from_secs(90);

struct Member {
    child: Child,
    metrics: SocketAddr,
}

/// A consumer process in `group`, as instance `name`, with a 3 s session.
fn member(topic: &str, group: &str, database_url: &str, name: &str) -> Member {
    let metrics = free_port();
    let child = Command::new(binary("floodgate-consumer"))
        .env("FLOODGATE_DATABASE_URL", database_url)
        .env("FLOODGATE_KAFKA_BROKERS", kafka_brokers())
        .env("FLOODGATE_RESERVATIONS_TOPIC", topic)
        .env("FLOODGATE_CONSUMER_GROUP", group)
        .env("FLOODGATE_CONSUMER_INSTANCE_ID", name)
        .env("FLOODGATE_CONSUMER_SESSION_TIMEOUT_MS", "3000")
        .env("FLOODGATE_CONSUMER_METRICS_LISTEN", metrics.to_string())
        .env("FLOODGATE_CONSUMER_BATCH", "50")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("the consumer binary starts");
    Member { child, metrics }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Events of reservations `from..to` of twelve pools (spread over the partitions by their keys).
fn events(
    from: usize,
    to: usize,
    make: fn(floodgate_protocol::events::ReservationData) -> Event,
) -> Vec<(String, Vec<u8>)> {
    (from..to)
        .map(|i| {
            let pool = format!("p{}", i % 12);
            (
                pool_partition_key(SALE, &pool),
                event(SALE, &pool, &format!("g{i}"), make).to_json(),
            )
        })
        .collect()
}

/// How many partitions each instance holds now.
async fn holders(db: &PgPool, group: &str) -> BTreeMap<String, usize> {
    let owners: Vec<Option<String>> =
        sqlx::query_scalar("select owner from consumer_partitions where group_id = $1")
            .bind(group)
            .fetch_all(db)
            .await
            .unwrap();
    let mut held = BTreeMap::new();
    for owner in owners.into_iter().flatten() {
        let instance = owner.split('/').next().unwrap_or_default().to_owned();
        *held.entry(instance).or_insert(0) += 1;
    }
    held
}

async fn metric(member: &Member, series: &str) -> Option<f64> {
    floodgate_tests::scrape(member.metrics, series).await
}

fn spread(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_then_three_members_share_six_partitions_through_a_kill_and_lose_or_repeat_nothing() {
    const RESERVATIONS: usize = 3_000;
    let topic = unique("floodgate.group-test.");
    ensure_topics(&kafka_brokers(), &topic, PARTITIONS).await;
    let (url, db) = fresh_database().await;
    let group = unique("floodgate-group-");

    // Two members split the six partitions, three each.
    let mut a = member(&topic, &group, &url, "a");
    let b = member(&topic, &group, &url, "b");
    eventually("two members, three partitions each", WAIT, async || {
        holders(&db, &group).await == spread(&[("a", 3), ("b", 3)])
    })
    .await;

    // The stream flows; `a` is killed outright in the middle of it.
    let mut produced = events(0, RESERVATIONS, Event::SeatReserved);
    produce(&kafka_brokers(), &topic, &produced).await;
    eventually("the first batches are in", WAIT, async || {
        count(&db, "select count(*) from booking_events").await >= 300
    })
    .await;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let at_kill = count(&db, "select count(*) from booking_events").await;
    assert!(
        (at_kill as usize) < RESERVATIONS,
        "killed mid-stream ({at_kill})"
    );

    // More events, and two newcomers: the survivor takes the dead member's partitions once its
    // session lapses, and the three live members end with two partitions each.
    let confirmations = events(0, RESERVATIONS / 2, Event::PaymentConfirmed);
    produce(&kafka_brokers(), &topic, &confirmations).await;
    produced.extend(confirmations);
    let c = member(&topic, &group, &url, "c");
    let mut d = member(&topic, &group, &url, "d");
    eventually("b, c and d hold two partitions each", WAIT, async || {
        holders(&db, &group).await == spread(&[("b", 2), ("c", 2), ("d", 2)])
    })
    .await;
    let more = events(RESERVATIONS, RESERVATIONS + 600, Event::SeatReserved);
    produce(&kafka_brokers(), &topic, &more).await;
    produced.extend(more);

    // Every event applied once: one audit entry each, one booking per reservation, each paid
    // one confirmed; and the group's stored offsets at the end of every partition.
    eventually("every event applied", WAIT, async || {
        count(&db, "select count(*) from booking_events").await as usize == produced.len()
    })
    .await;
    assert_bookings(&db, RESERVATIONS + 600, RESERVATIONS / 2).await;
    let stored = floodgate_platform::progress::stored_offsets(&db, &group, &topic)
        .await
        .unwrap();
    let applied: i64 = stored.values().sum();
    assert_eq!(
        applied as usize,
        produced.len(),
        "offsets at the end of every partition: {stored:?}"
    );
    // Nothing was delivered twice to the members that took over: each started a partition
    // exactly where the last committed batch left it.
    for survivor in [&b, &c, &d] {
        let repeated = metric(
            survivor,
            "floodgate_consumer_events_total{outcome=\"repeated\"}",
        )
        .await
        .unwrap_or(0.0);
        assert_eq!(repeated, 0.0, "events applied again by a survivor");
    }
    eventually("the lag metric reads zero", WAIT, async || {
        for member in [&b, &c, &d] {
            if metric(member, "floodgate_consumer_lag_all_partitions").await != Some(0.0) {
                return false;
            }
        }
        true
    })
    .await;

    // A member that stops (SIGTERM) gives its partitions back on its way out, and the other two
    // share the six again.
    let stopped = Command::new("kill")
        .arg("-TERM")
        .arg(d.child.id().to_string())
        .status()
        .unwrap();
    assert!(stopped.success());
    let exited = d.child.wait().unwrap();
    assert!(exited.success(), "{exited:?}");
    // Given back on the way out, not left to lapse: none is d's any more.
    assert_eq!(holders(&db, &group).await.get("d"), None);
    eventually("b and c hold three each again", WAIT, async || {
        holders(&db, &group).await == spread(&[("b", 3), ("c", 3)])
    })
    .await;
}
