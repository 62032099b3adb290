//! Floodgate on a real Redis Cluster (three primaries, three replicas, from `deploy/stack.sh
//! cluster-up`): a sale's pools spread over the primaries, and seats are sold on every one of
//! them. The named scenarios of the rest of the suite run against the cluster too, in
//! `deploy/test.sh`'s cluster pass.

use std::collections::BTreeSet;

use floodgate_tests::{eventually, test_cluster, unique, SaleSpec, TestApp, TestOptions};

/// Each primary's address and the slot ranges it serves (`CLUSTER SLOTS`).
async fn primaries(seed: &str) -> Vec<(String, Vec<(u16, u16)>)> {
    let mut node = redis::Client::open(seed)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut node)
        .await
        .unwrap();
    let mut by_primary: Vec<(String, Vec<(u16, u16)>)> = Vec::new();
    for range in ranges {
        let first: u16 = redis::from_redis_value(&range[0]).unwrap();
        let last: u16 = redis::from_redis_value(&range[1]).unwrap();
        let primary: Vec<redis::Value> = redis::from_redis_value(&range[2]).unwrap();
        let host: String = redis::from_redis_value(&primary[0]).unwrap();
        let port: u16 = redis::from_redis_value(&primary[1]).unwrap();
        let address = format!("{host}:{port}");
        match by_primary.iter_mut().find(|(a, _)| *a == address) {
            Some((_, slots)) => slots.push((first, last)),
            None => by_primary.push((address, vec![(first, last)])),
        }
    }
    by_primary
}

#[sqlx::test(migrations = "../migrations")]
async fn a_sales_pools_spread_over_the_primaries_and_each_sells(db: sqlx::PgPool) {
    let cluster = test_cluster();
    let options = TestOptions {
        redis_cluster: Some(cluster.clone()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("cluster-");
    let pools: Vec<(String, u32)> = (1..=12).map(|i| (format!("p{i}"), 3)).collect();
    let spec = SaleSpec {
        pools: pools.clone(),
        // Arming twelve pools takes longer than 200 ms on a busy machine, and a pool cannot be
        // armed once its sale has opened.
        opens_in: std::time::Duration::from_millis(1500),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;

    // Where each pool's state lives: the primary serving its slot, asked directly.
    let primaries = primaries(&cluster[0]).await;
    assert_eq!(primaries.len(), 3, "three primaries: {primaries:?}");
    let mut holders = BTreeSet::new();
    for (pool, _) in &pools {
        let config = app.keys.pool(&sale, pool).config();
        let mut found = Vec::new();
        for (address, _) in &primaries {
            let mut node = redis::Client::open(format!("redis://{address}"))
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            // A primary answers for its own slots only: EXISTS of another's key is MOVED.
            let exists: redis::RedisResult<bool> = redis::cmd("EXISTS")
                .arg(&config)
                .query_async(&mut node)
                .await;
            if exists == Ok(true) {
                found.push(address.clone());
            }
        }
        assert_eq!(
            found.len(),
            1,
            "pool {pool} lives on one primary: {found:?}"
        );
        holders.insert(found.remove(0));
    }
    assert!(
        holders.len() >= 2,
        "twelve pools on {} primaries: {holders:?}",
        holders.len()
    );

    // And seats sell on every one of them.
    app.until_open(&sale).await;
    for (i, (pool, _)) in pools.iter().enumerate() {
        let token = app.token(&sale, i as u64 + 1, 1, 60_000);
        let held = app.reserve(&sale, &token, &unique("k"), pool, 1).await;
        assert!(held.is_ok(), "pool {pool}: {held:?}");
    }
    eventually(
        "every hold is in PostgreSQL",
        std::time::Duration::from_secs(20),
        || async { app.bookings(&sale, "PENDING_PAYMENT").await == 12 },
    )
    .await;
}
