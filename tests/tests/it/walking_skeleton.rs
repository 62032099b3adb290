//! One sale end to end on the real Redis, Kafka broker and PostgreSQL: 50 clients queue for 10
//! seats; they are admitted in their drawn order, as stock allows, and exactly 10 win. Once the
//! ten pay, nothing can come back, and everyone still waiting is told `sold_out`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::reservation::ReservationState;
use floodgate_protocol::token::AdmissionClaims;
use floodgate_protocol::ws::ServerMessage;
use floodgate_tests::eventually;
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
        body: Box<ReservationCreated>,
        retry_body: Box<ReservationCreated>,
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
    /// Pre-queue sizes it was told before the opening.
    prequeue: Vec<u64>,
    claims: Option<AdmissionClaims>,
    ending: Ending,
}

/// Reservations won so far: (id, secret).
type Won = Mutex<Vec<(String, String)>>;

async fn client(app: &TestApp, sale: &str, won: &Won) -> ClientLog {
    let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url(sale))
        .await
        .expect("websocket connects");
    let mut ticket = None;
    let mut positions = Vec::new();
    let mut prequeue = Vec::new();
    let (token, claims) = loop {
        let frame = tokio::time::timeout(Duration::from_secs(60), ws.next())
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
            ServerMessage::PreQueue { size, .. } => prequeue.push(size),
            ServerMessage::Position { position, .. } => positions.push(position),
            ServerMessage::Admitted { token, .. } => {
                let claims = app
                    .signer
                    .verifier()
                    .verify(&token, floodgate_protocol::now_millis())
                    .expect("a valid token");
                break (token, claims);
            }
            ServerMessage::SoldOut => {
                return ClientLog {
                    ticket: ticket.expect("ticket first"),
                    positions,
                    prequeue,
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
    let ending = match app.reserve(sale, &token, &key, "p1", 1).await {
        Ok(reply) => {
            let retry_body = app
                .reserve(sale, &token, &key, "p1", 1)
                .await
                .expect("a retry with the same key gets the same answer");
            won.lock()
                .unwrap()
                .push((reply.reservation_id.clone(), reply.secret.clone()));
            Ending::Reserved {
                body: Box::new(reply),
                retry_body: Box::new(retry_body),
            }
        }
        Err(refused) => {
            assert_eq!(
                (refused.status(), refused.code()),
                (409, "sold_out"),
                "{refused}"
            );
            Ending::RefusedSoldOut
        }
    };
    ClientLog {
        ticket,
        positions,
        prequeue,
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
    let opens_at = floodgate_protocol::now_millis() + spec.opens_in.as_millis() as i64;
    app.create_sale(&sale, &spec).await;

    let won = Won::default();
    let count = || app.bookings(&sale, "PENDING_PAYMENT");
    // Ten win and are written to PostgreSQL as PENDING_PAYMENT; admission then stops (no seat is
    // available, but holds could still return some). Once the ten pay, nothing can return: the
    // waiting room tells everyone left that the sale is sold out.
    let payer = async {
        eventually(
            "ten PENDING_PAYMENT bookings in PostgreSQL",
            Duration::from_secs(60),
            || async { count().await >= SEATS as i64 },
        )
        .await;
        let won = won.lock().unwrap().clone();
        assert_eq!(won.len(), SEATS as usize);
        for (id, secret) in &won {
            app.pay(&sale, id, secret, "succeed").await;
        }
    };
    let (logs, ()) = tokio::join!(
        futures::future::join_all((0..CLIENTS).map(|_| client(&app, &sale, &won))),
        payer
    );

    // Every client got its own ticket, joined the pre-queue, and was told positions that never
    // went up and never counted more than everyone in line.
    let tickets: BTreeSet<u64> = logs.iter().map(|l| l.ticket).collect();
    assert_eq!(
        tickets,
        (1..=CLIENTS as u64).collect(),
        "one distinct ticket per client"
    );
    for log in &logs {
        assert!(
            !log.prequeue.is_empty(),
            "ticket {} was not told it is in the pre-queue",
            log.ticket
        );
        assert!(
            log.positions.windows(2).all(|w| w[1] <= w[0]),
            "position went up: {:?}",
            log.positions
        );
        assert!(log.positions.iter().all(|p| *p <= CLIENTS as u64));
    }
    let told_sold_out = logs
        .iter()
        .filter(|l| matches!(l.ending, Ending::ToldSoldOut))
        .count();
    assert!(
        told_sold_out > 0,
        "stock-aware admission kept some clients waiting until the sale sold out"
    );

    // Admission followed the configured rate: the gateway's burst is one tick's worth, so the last
    // admission cannot come before (admitted - burst) / rate after the opening. (A lower bound
    // only: a busy machine makes admission slower, never faster.)
    let admitted: Vec<&AdmissionClaims> = logs.iter().filter_map(|l| l.claims.as_ref()).collect();
    assert!(admitted.len() >= SEATS as usize);
    let burst = (RATE * 0.05).ceil();
    let last = admitted.iter().map(|c| c.iat_ms).max().unwrap();
    let floor_ms = ((admitted.len() as f64 - burst) / RATE * 1000.0) as i64;
    assert!(
        last - opens_at >= floor_ms - 50,
        "{} admissions within {} ms of opening exceed the rate {RATE}/s",
        admitted.len(),
        last - opens_at
    );
    // Admission followed the drawn order: every admitted ticket's place is ahead of every
    // ticket that was never admitted.
    let order = app.drawn_order(app.gateway, &sale).await;
    assert_eq!(order.size(), CLIENTS as u64);

    let last_admitted_place = admitted
        .iter()
        .map(|c| order.place(c.ticket))
        .max()
        .unwrap();
    for log in logs.iter().filter(|l| l.claims.is_none()) {
        assert!(
            order.place(log.ticket) > last_admitted_place,
            "ticket {} (place {}) was passed over",
            log.ticket,
            order.place(log.ticket)
        );
    }

    // Exactly SEATS reservations; everyone else was told the sale is sold out; retries replayed.
    let mut reserved = HashMap::new();
    for log in &logs {
        match &log.ending {
            Ending::Reserved { body, retry_body } => {
                assert_eq!(body, retry_body, "the retry got the identical 201 body");
                assert_eq!(body.status, ReservationState::Held);
                assert!(body.secret.len() >= 32);
                reserved.insert(body.reservation_id.clone(), log.ticket);
            }
            Ending::RefusedSoldOut | Ending::ToldSoldOut => {}
        }
    }
    assert_eq!(
        reserved.len(),
        SEATS as usize,
        "exactly {SEATS} reservations"
    );

    // Redis: nothing left, all ten sold, and available + held + sold = capacity.
    let pool = app.keys.pool(&sale, "p1");
    assert_eq!(app.redis_int(&pool.available()).await, 0);
    assert_eq!(app.redis_int(&pool.held()).await, 0);
    assert_eq!(app.redis_int(&pool.sold()).await, SEATS as i64);

    // PostgreSQL: exactly the ten reservations, one row each, retries absorbed, now paid.
    eventually(
        "ten CONFIRMED bookings",
        Duration::from_secs(30),
        || async { app.bookings(&sale, "CONFIRMED").await == SEATS as i64 },
    )
    .await;
    let rows: Vec<(String, i64)> =
        sqlx::query_as("select reservation_id, ticket from bookings where sale_id = $1")
            .bind(&sale)
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(
        rows.len(),
        SEATS as usize,
        "one row per reservation, retries absorbed"
    );
    for (id, ticket) in rows {
        assert_eq!(
            reserved.get(&id),
            Some(&(ticket as u64)),
            "row {id} matches a 201"
        );
    }
}
