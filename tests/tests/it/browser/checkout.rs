//! The page's way to the payment: it books on its own origin whatever the link says, and follows no checkout URL outside the provider's origin.

use super::*;

/// A listener standing for an attacker's origin: it counts the connections the page makes.
async fn trap() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    (addr, hits)
}

/// Issue 12, defect 17: a link to the real site naming another origin in `api` must not send
/// the admission token or the reservation's secret there: the page books on its own origin.
#[sqlx::test(migrations = "../migrations")]
async fn defect_17_the_page_books_on_its_own_origin_whatever_the_link_says(db: sqlx::PgPool) {
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3),
        ..SaleSpec::default()
    };
    let (_site, app, sale) = published_sale(db, "origin-", spec).await;
    let (attacker, hits) = trap().await;
    let url = format!("http://{}/?api=http://{attacker}", app.gateway);

    let seen = script("journey.mjs", vec![url, "pay".into()]).await;
    assert!(
        seen["result"].as_str().unwrap().contains("confirmed"),
        "{seen}"
    );
    eventually("a CONFIRMED booking", Duration::from_secs(30), || async {
        app.bookings(&sale, "CONFIRMED").await == 1
    })
    .await;
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the page contacted the origin the link named"
    );
}

/// The page follows a checkout URL only to the payment provider's origin the site names: a
/// booking service (or anything posing as one) cannot send the payer elsewhere.
#[sqlx::test(migrations = "../migrations")]
async fn a_checkout_url_outside_the_providers_origin_is_not_followed(db: sqlx::PgPool) {
    let site = Site::new();
    let options = TestOptions {
        checkout_origins: Some(vec!["https://pay.example.invalid".into()]),
        ..site.options()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = unique("checkout-");
    app.create_sale(
        &sale,
        &SaleSpec {
            opens_in: Duration::from_secs(3),
            ..SaleSpec::default()
        },
    )
    .await;
    site.publish(&app, &sale).await;

    let seen = script("journey.mjs", vec![home_url(&app), "refused".into()]).await;
    assert!(
        seen["result"].as_str().unwrap().contains("not opened"),
        "{seen}"
    );
    assert_eq!(seen["pages"], 1, "no checkout tab was opened: {seen}");
    let held = app.keys.pool(&sale, "p1").held();
    assert_eq!(app.redis_int(&held).await, 1, "the hold is still there");
}
