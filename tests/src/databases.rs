//! Databases for tests that need more than `#[sqlx::test]` gives: fresh, migrated ones on the
//! `DATABASE_URL` server.

use super::*;

/// A fresh, migrated database on the `DATABASE_URL` server, for tests that need a multi-threaded
/// runtime (`#[sqlx::test]` runs on a single thread). Named `floodgate_test_*`; `deploy/test.sh`
/// drops leftovers of earlier runs.
pub async fn fresh_db() -> PgPool {
    fresh_database().await.1
}

/// A fresh, migrated database and its URL (for a process or a proxy of the test's own).
pub async fn fresh_database() -> (String, PgPool) {
    let server =
        std::env::var("DATABASE_URL").expect("DATABASE_URL names the test database server");
    let admin = PgPool::connect(&server)
        .await
        .expect("database server reachable");
    let name = unique("floodgate_test_");
    sqlx::query(&format!("create database \"{name}\""))
        .execute(&admin)
        .await
        .expect("create test database");
    let mut url = url_with_database(&server, &name);
    if url.is_empty() {
        url = server.clone();
    }
    let db = migrated_pool(&url).await;
    (url, db)
}

/// A pool on the database at `url` (a test's own server, say), with the schema applied.
pub async fn migrated_pool(url: &str) -> PgPool {
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(url)
        .await
        .expect("test database reachable");
    floodgate_platform::runtime::migrator()
        .run(&db)
        .await
        .expect("migrations apply");
    db
}

/// `postgres://user@host:port/db?opts` with its database replaced by `name`.
fn url_with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let Some(slash) = base.rfind('/').filter(|i| *i > "postgres://".len()) else {
        return String::new();
    };
    let mut out = format!("{}/{name}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}
