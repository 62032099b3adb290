//! The payment provider in a rush: every payer's browser holds a connection to it at once (a
//! kept-alive one, or one that has not sent its request yet), and the booking service must still
//! reach it to start the next payment. The sandbox stands in for a provider built for that; when
//! it could not take the crowd, the benchmarks' honest people were answered 503
//! `payment_provider_unavailable` by a stand-in, not by Floodgate.

use super::*;

/// More connections than an internal listener's cap (256), fewer than a provider's, and few
/// enough past that cap for the kernel's accept queue to hold the rest.
const PAYERS_CONNECTED: usize = 300;

#[sqlx::test(migrations = "../migrations")]
async fn payers_holding_connections_do_not_shut_the_booking_service_out(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let b = book(&app, 300).await;
    let mut payers = Vec::with_capacity(PAYERS_CONNECTED);
    for _ in 0..PAYERS_CONNECTED {
        payers.push(
            tokio::net::TcpStream::connect(app.sandbox)
                .await
                .expect("the kernel takes the connection"),
        );
    }
    // Each held connection is the provider's to time out (ten seconds without a request); the
    // booking service gives up on the provider after five.
    let (status, body) = start_payment(&app, &b).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (202, None),
        "the payment starts while {PAYERS_CONNECTED} payers are connected: {body}"
    );
    drop(payers);
}
