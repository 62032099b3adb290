//! A real Prometheus scrapes the compose stack with the shipped alert rules and sees a broker outage fire them and clear them.

use super::*;

/// A real Prometheus scrapes the stack with the shipped alert rules (durations scaled by
/// `TIME_SCALE`): when the broker goes, the booking service knows it and answers 503, and both
/// FloodgateBrokerDown and FloodgateBookingUnavailable fire; when it comes back, both clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_fires_and_clears_the_alerts_of_a_broker_outage() {
    let (url, db) = fresh_database().await;
    // A broker of the test's own, reached through a proxy that can cut it.
    let port = floodgate_tests::gateways::free_port().port();
    let proxy = ChaosProxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
    let _broker = PrivateBroker::start_on(port, Some(proxy.addr)).await;
    let options = StackOptions {
        kafka_brokers: Some(proxy.addr.to_string()),
        ..StackOptions::default()
    };
    let stack = Stack::up(&url, options).await;
    let targets = [stack.metrics_targets(), vec![stack.edge_metrics]].concat();
    let prometheus = Prometheus::start(&targets).await;

    let sale = unique("compose-alerts-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 100)],
        opens_in: Duration::from_millis(500),
        admission_rate: 100.0,
        ..SaleSpec::default()
    };
    stack.create_sale(&db, &sale, &spec).await;
    let mut tokens = Vec::new();
    for from in addresses(11, 12) {
        let mut client = join(&stack, &sale, &from, &[]).await.expect("joins");
        tokens.push(client.admitted(Duration::from_secs(30)).await);
    }
    let booking = BookingClient::new(reqwest::Client::new(), stack.edge);
    let first = tokens.pop().unwrap();
    let held = booking.reserve(&sale, &first, &unique("k-"), "p1", 1).await;
    assert!(held.is_ok(), "a hold while the broker is up: {held:?}");

    // The broker cut: people keep trying to book through the edge, and every attempt is a 503
    // (the first ones after the delivery timeout, the rest at once), until both alerts fire.
    // (A counter's first value is no increase to Prometheus: the refusals must go on after it
    // has seen the first.)
    proxy.cut();
    let mut refused = 0;
    let attempts = async {
        loop {
            for token in &tokens {
                let answer = booking.reserve(&sale, token, &unique("k-"), "p1", 1).await;
                let status = answer.as_ref().err().map(|e| e.status());
                assert_eq!(
                    status,
                    Some(503),
                    "a reservation while the broker is cut: {answer:?}"
                );
                refused += 1;
                // Below the pass's allowance of two a second (booking::limits).
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
        }
    };
    let fired = async {
        for alert in ["FloodgateBrokerDown", "FloodgateBookingUnavailable"] {
            prometheus.fires(alert, Duration::from_secs(90)).await;
        }
    };
    tokio::select! {
        () = fired => {}
        () = attempts => unreachable!("the attempts go on until the alerts fire"),
    }
    assert!(refused > 0);

    proxy.restore();
    for alert in ["FloodgateBrokerDown", "FloodgateBookingUnavailable"] {
        prometheus.clears(alert, Duration::from_secs(120)).await;
    }
}
