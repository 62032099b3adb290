//! Creating and arming sales against the real PostgreSQL and Redis.

use std::time::Duration;

use floodgate_booking::catalog::{self, CatalogError};
use floodgate_tests::{unique, SaleSpec, TestApp};

mod served;

#[sqlx::test(migrations = "../migrations")]
async fn arming_is_idempotent_before_the_opening_and_refused_after(db: sqlx::PgPool) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("arm-");
    let spec = SaleSpec {
        pools: vec![("a".into(), 7), ("b".into(), 3)],
        opens_in: Duration::from_millis(1_500),
        ..SaleSpec::default()
    };
    let file = spec.to_file(&sale);
    catalog::create_sale(&db, &file).await.unwrap();
    let first = catalog::arm_sale(&db, &app.redis, &app.keys, &sale)
        .await
        .unwrap();
    assert_eq!(
        first.pools,
        vec![("a".to_string(), 7), ("b".to_string(), 3)]
    );
    let a = app.keys.pool(&sale, "a");
    assert_eq!(app.redis_int(&a.available()).await, 7);

    // Arming again before the opening gives the same state: counters at capacity.
    let mut conn = app.redis.clone();
    let _: i64 = redis::cmd("DECR")
        .arg(a.available())
        .query_async(&mut conn)
        .await
        .unwrap();
    let second = catalog::arm_sale(&db, &app.redis, &app.keys, &sale)
        .await
        .unwrap();
    assert_eq!(second, first);
    assert_eq!(app.redis_int(&a.available()).await, 7);
    assert_eq!(app.redis_int(&a.held()).await, 0);
    let armed_at: Option<time::OffsetDateTime> =
        sqlx::query_scalar("select armed_at from sales where id = $1")
            .bind(&sale)
            .fetch_one(&db)
            .await
            .unwrap();
    assert!(armed_at.is_some(), "the catalog records the arming");

    // Once open, counters are live: arming and rewriting the sale are both refused, and the
    // live counter is left alone.
    let opens_at = file.opens_at;
    let wait = opens_at - time::OffsetDateTime::now_utc() + time::Duration::milliseconds(50);
    if wait.is_positive() {
        tokio::time::sleep(wait.try_into().unwrap()).await;
    }
    let _: i64 = redis::cmd("DECR")
        .arg(a.available())
        .query_async(&mut conn)
        .await
        .unwrap();
    let refused = catalog::arm_sale(&db, &app.redis, &app.keys, &sale)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, CatalogError::AlreadyOpen { .. }),
        "{refused}"
    );
    assert_eq!(app.redis_int(&a.available()).await, 6);
    let rewrite = catalog::create_sale(&db, &file).await.unwrap_err();
    assert!(
        matches!(rewrite, CatalogError::AlreadyOpen { .. }),
        "{rewrite}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_sale_with_an_undeclared_train_is_refused_clearly(db: sqlx::PgPool) {
    let mut file = SaleSpec::default().to_file(&unique("bad-"));
    file.trains.clear();
    let err = catalog::create_sale(&db, &file).await.unwrap_err();
    assert!(err.to_string().contains("not in the catalog"), "{err}");
    assert!(matches!(
        catalog::arm_sale(
            &db,
            &connect().await,
            &floodgate_platform::keys::Keys::new("t:"),
            &file.id
        )
        .await,
        Err(CatalogError::NotFound(_))
    ));
}

async fn connect() -> floodgate_platform::runtime::RedisConn {
    floodgate_platform::runtime::connect_redis(&floodgate_tests::redis_args("", None))
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_per_buyer_limit_on_a_sale_anyone_may_join_is_refused(db: sqlx::PgPool) {
    // Anonymous passes name no buyer, so the limit could not be counted for them: a sale that
    // sets one must require signed-in buyers.
    let spec = SaleSpec {
        door: floodgate_protocol::settings::Door {
            max_seats_per_buyer: Some(2),
            ..floodgate_protocol::settings::Door::default()
        },
        ..SaleSpec::default()
    };
    let file = spec.to_file(&unique("limit-"));
    let err = catalog::create_sale(&db, &file).await.unwrap_err();
    assert!(err.to_string().contains("identity = \"required\""), "{err}");
    let written: i64 = sqlx::query_scalar("select count(*) from sales where id = $1")
        .bind(&file.id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(written, 0, "nothing of the sale was written");
}
