//! The fault-injecting proxy's own behaviour, against the real Redis: what a test that slows a
//! dependency down relies on.

use std::time::Duration;

use floodgate_tests::chaos::ChaosProxy;
use tokio::time::Instant;

/// A delayed dependency is slow, not serial: every reply comes at least the delay late, and
/// pipelined replies overlap as they would on a slow network instead of queueing behind each
/// other's delay (20 concurrent commands take about one delay, not twenty). Removing the delay
/// makes it fast again.
#[tokio::test]
async fn a_delay_is_a_latency_that_pipelined_replies_share() {
    let proxy = ChaosProxy::start(floodgate_tests::redis_addr()).await;
    let client = redis::Client::open(format!("redis://{}", proxy.addr)).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let ping = |mut conn: redis::aio::MultiplexedConnection| async move {
        let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        assert_eq!(pong, "PONG");
    };
    ping(conn.clone()).await;

    let delay = Duration::from_secs(1);
    proxy.delay(delay);
    let started = Instant::now();
    ping(conn.clone()).await;
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());

    let started = Instant::now();
    futures::future::join_all((0..20).map(|_| ping(conn.clone()))).await;
    let took = started.elapsed();
    assert!(
        took >= delay && took < delay * 5,
        "20 pipelined commands took {took:?}: a queue of delays would take 20 s"
    );

    proxy.delay(Duration::ZERO);
    let started = Instant::now();
    let _: () = redis::cmd("SET")
        .arg(floodgate_tests::unique("chaos-"))
        .arg(1)
        .arg("EX")
        .arg(10)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(started.elapsed() < delay, "{:?}", started.elapsed());
}
