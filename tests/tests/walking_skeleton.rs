//! One sale end to end on the real Redis, Kafka broker and PostgreSQL: 50 clients queue for 10
//! seats; each is admitted in turn, tries to reserve, and exactly 10 win.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use floodgate_contract::token::AdmissionClaims;
use floodgate_contract::ws::ServerMessage;
use floodgate_tests::{unique, SaleSpec, TestApp};
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;

const CLIENTS: usize = 50;
const SEATS: u32 = 10;
const RATE: f64 = 25.0;

/// How one client's attempt ended.
#[derive(Debug)]
enum Ending {
    Reserved {
        body: serde_json::Value,
        retry_body: serde_json::Value,
    },
    /// 409 sold_out from the booking API.
    RefusedSoldOut,
    /// A `sold_out` message from the waiting room instead of an admission.
    ToldSoldOut,
}

#[derive(Debug)]
struct ClientLog {
    ticket: u64,
    positions: Vec<u64>,
    claims: Option<AdmissionClaims>,
    ending: Ending,
}

async fn client(app: &TestApp, sale: &str) -> ClientLog {
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url(sale))
        .await
        .expect("websocket connects");
    let mut ticket = None;
    let mut positions = Vec::new();
    let (token, claims) = loop {
        let frame = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .expect("the waiting room keeps talking")
            .expect("socket open")
            .expect("frame");
        let Message::Text(text) = frame else { continue };
        match serde_json::from_str::<ServerMessage>(&text).expect("a protocol message") {
            ServerMessage::Ticket {
                ticket: t, sale: s, ..
            } => {
                assert_eq!(s, sale);
                ticket = Some(t);
            }
            ServerMessage::Position { position, .. } => positions.push(position),
            ServerMessage::Admitted { token, .. } => {
                let claims = app
                    .signer
                    .verifier()
                    .verify(&token, floodgate_contract::now_millis())
                    .expect("a valid token");
                break (token, claims);
            }
            ServerMessage::SoldOut => {
                return ClientLog {
                    ticket: ticket.expect("ticket first"),
                    positions,
                    claims: None,
                    ending: Ending::ToldSoldOut,
                };
            }
            ServerMessage::Pong => {}
        }
    };
    let ticket = ticket.expect("the ticket comes first");
    assert_eq!(
        claims.ticket, ticket,
        "the token is bound to this client's ticket"
    );

    let key = uuid::Uuid::new_v4().to_string();
    let body = serde_json::json!({ "pool": "p1", "seats": 1 });
    let (status, reply) = app.reserve(sale, &token, &key, &body).await;
    let ending = match status {
        201 => {
            let (retry_status, retry_body) = app.reserve(sale, &token, &key, &body).await;
            assert_eq!(
                retry_status, 201,
                "a retry with the same key gets the same answer"
            );
            Ending::Reserved {
                body: reply,
                retry_body,
            }
        }
        409 => {
            assert_eq!(reply["error"], "sold_out", "{reply}");
            Ending::RefusedSoldOut
        }
        other => panic!("unexpected {other}: {reply}"),
    };
    ClientLog {
        ticket,
        positions,
        claims: Some(claims),
        ending,
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn fifty_clients_ten_seats_exactly_ten_reservations(db: sqlx::PgPool) {
    let app = TestApp::spawn(db.clone()).await;
    let sale = unique("skeleton-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), SEATS)],
        opens_in: Duration::from_secs(3),
        admission_rate: RATE,
        ..SaleSpec::default()
    };
    let opens_at = floodgate_contract::now_millis() + spec.opens_in.as_millis() as i64;
    app.create_sale(&sale, &spec).await;

    let logs: Vec<ClientLog> =
        futures::future::join_all((0..CLIENTS).map(|_| client(&app, &sale))).await;

    // Every client got its own ticket, and positions while it waited that never went up.
    let tickets: BTreeSet<u64> = logs.iter().map(|l| l.ticket).collect();
    assert_eq!(
        tickets,
        (1..=CLIENTS as u64).collect(),
        "one distinct ticket per client"
    );
    for log in &logs {
        assert!(
            !log.positions.is_empty(),
            "ticket {} was never told its position",
            log.ticket
        );
        assert!(
            log.positions.windows(2).all(|w| w[1] <= w[0]),
            "position went up: {:?}",
            log.positions
        );
        assert!(*log.positions.last().unwrap() <= log.ticket);
    }

    // Admission followed the configured rate: the gateway's burst is one tick's worth, so the last
    // admission cannot come before (admitted - burst) / rate after the opening. (A lower bound
    // only: a busy machine makes admission slower, never faster.)
    let admitted: Vec<&AdmissionClaims> = logs.iter().filter_map(|l| l.claims.as_ref()).collect();
    if admitted.len() > 10 {
        let burst = (RATE * 0.05).ceil();
        let last = admitted.iter().map(|c| c.iat_ms).max().unwrap();
        let floor_ms = ((admitted.len() as f64 - burst) / RATE * 1000.0) as i64;
        assert!(
            last - opens_at >= floor_ms - 50,
            "{} admissions within {} ms of opening exceed the rate {RATE}/s",
            admitted.len(),
            last - opens_at
        );
        // Earlier tickets were admitted no later than later ones.
        let mut by_ticket: Vec<_> = admitted.iter().map(|c| (c.ticket, c.iat_ms)).collect();
        by_ticket.sort();
        let first_half_latest = by_ticket[..by_ticket.len() / 2]
            .iter()
            .map(|x| x.1)
            .max()
            .unwrap();
        let second_half_earliest = by_ticket[by_ticket.len() / 2..]
            .iter()
            .map(|x| x.1)
            .min()
            .unwrap();
        assert!(
            first_half_latest <= second_half_earliest + 1_000,
            "admission did not follow ticket order"
        );
    }

    // Exactly SEATS reservations; everyone else was told the sale is sold out; retries replayed.
    let mut reserved = HashMap::new();
    for log in &logs {
        match &log.ending {
            Ending::Reserved { body, retry_body } => {
                assert_eq!(body, retry_body, "the retry got the identical 201 body");
                assert_eq!(body["status"], "held");
                assert!(body["secret"].as_str().is_some_and(|s| s.len() >= 32));
                reserved.insert(
                    body["reservation_id"].as_str().unwrap().to_owned(),
                    log.ticket,
                );
            }
            Ending::RefusedSoldOut | Ending::ToldSoldOut => {}
        }
    }
    assert_eq!(
        reserved.len(),
        SEATS as usize,
        "exactly {SEATS} reservations"
    );

    // Redis: nothing left, ten held, and the invariant available + held + sold = capacity.
    let pool = app.keys.pool(&sale, "p1");
    assert_eq!(app.redis_int(&pool.available()).await, 0);
    assert_eq!(app.redis_int(&pool.held()).await, SEATS as i64);
    assert_eq!(app.redis_int(&pool.sold()).await, 0);

    // PostgreSQL: the consumer wrote exactly the ten reservations, as PENDING_PAYMENT.
    let count = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from bookings where sale_id = $1")
            .bind(&sale)
            .fetch_one(&db)
            .await
            .unwrap()
    };
    app.eventually(
        "ten bookings in PostgreSQL",
        Duration::from_secs(30),
        || async { count().await >= SEATS as i64 },
    )
    .await;
    let rows: Vec<(String, String, i64)> =
        sqlx::query_as("select reservation_id, status, ticket from bookings where sale_id = $1")
            .bind(&sale)
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(
        rows.len(),
        SEATS as usize,
        "one row per reservation, retries absorbed"
    );
    for (id, status, ticket) in rows {
        assert_eq!(status, "PENDING_PAYMENT");
        assert_eq!(
            reserved.get(&id),
            Some(&(ticket as u64)),
            "row {id} matches a 201"
        );
    }
}
