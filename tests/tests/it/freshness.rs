//! The freshness contract (docs/protocol.md, 1.2), against a real gateway and Redis: the front
//! of the line sees its exact place, further back a client hears only when its place crosses the
//! grid (within 1 % of the truth), everyone hears at least every heartbeat, and a pause, a resume
//! and admission arrive at once.
//!
//! The line is made long without thousands of clients: the test moves the sale's ticket counter
//! on, so the next client's ticket is far back, behind tickets nobody holds (live as far as the
//! room knows: it admits them at the sale's rate, as it would people who never book).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use floodgate_protocol::freshness::{allowance, shown, EXACT_UP_TO};
use floodgate_protocol::ws::ServerMessage;
use floodgate_tests::{eventually, SaleSpec, TestApp, TestOptions};
use futures::StreamExt;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// What one client heard, and when.
#[derive(Clone, Debug)]
enum Heard {
    Ping,
    Message(ServerMessage),
}

type Log = Arc<Mutex<Vec<(Instant, Heard)>>>;

/// A client in line: its ticket, and everything it hears from now on (read by a task of its
/// own, which also answers pings).
struct Client {
    ticket: u64,
    log: Log,
    _reader: tokio::task::JoinHandle<()>,
}

impl Client {
    async fn join(app: &TestApp, sale: &str) -> Client {
        let (mut ws, _) = tokio_tungstenite::connect_async(app.ws_url(sale))
            .await
            .expect("joins");
        let ticket = loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .expect("a ticket in time")
                .expect("open")
                .expect("a frame");
            if let Message::Text(text) = frame {
                match serde_json::from_str(&text).expect("a server message") {
                    ServerMessage::Ticket { ticket, .. } => break ticket,
                    other => panic!("the ticket first, not {other:?}"),
                }
            }
        };
        let log: Log = Arc::default();
        let reader = tokio::spawn({
            let log = log.clone();
            async move {
                while let Some(Ok(frame)) = ws.next().await {
                    let heard = match frame {
                        Message::Ping(_) => Heard::Ping,
                        Message::Text(text) => {
                            Heard::Message(serde_json::from_str(&text).expect("a server message"))
                        }
                        _ => continue,
                    };
                    log.lock().unwrap().push((Instant::now(), heard));
                }
            }
        });
        Client {
            ticket,
            log,
            _reader: reader,
        }
    }

    fn heard(&self) -> Vec<(Instant, Heard)> {
        self.log.lock().unwrap().clone()
    }

    /// The positions heard, in order, with when.
    fn positions(&self) -> Vec<(Instant, u64, Option<u64>)> {
        self.heard()
            .into_iter()
            .filter_map(|(at, heard)| match heard {
                Heard::Message(ServerMessage::Position { position, eta_secs }) => {
                    Some((at, position, eta_secs))
                }
                _ => None,
            })
            .collect()
    }

    fn admitted(&self) -> Option<Instant> {
        self.heard().into_iter().find_map(|(at, heard)| {
            matches!(heard, Heard::Message(ServerMessage::Admitted { .. })).then_some(at)
        })
    }

    /// The admission token, once heard.
    fn token(&self) -> Option<String> {
        self.heard().into_iter().find_map(|(_, heard)| match heard {
            Heard::Message(ServerMessage::Admitted { token, .. }) => Some(token),
            _ => None,
        })
    }

    fn sold_out(&self) -> Option<Instant> {
        self.heard().into_iter().find_map(|(at, heard)| {
            matches!(heard, Heard::Message(ServerMessage::SoldOut)).then_some(at)
        })
    }
}

/// The sale's frontier as read every 10 ms, from the moment this starts.
struct Frontier {
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    _reader: tokio::task::JoinHandle<()>,
}

impl Frontier {
    fn follow(app: &TestApp, sale: &str) -> Frontier {
        let samples: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
        let (mut redis, key) = (app.redis.clone(), app.keys.sale(sale).frontier());
        let reader = tokio::spawn({
            let samples = samples.clone();
            async move {
                loop {
                    let frontier: Option<u64> = redis::cmd("GET")
                        .arg(&key)
                        .query_async(&mut redis)
                        .await
                        .expect("GET the frontier");
                    samples
                        .lock()
                        .unwrap()
                        .push((Instant::now(), frontier.unwrap_or(0)));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        });
        Frontier {
            samples,
            _reader: reader,
        }
    }

    /// The frontier as last read at or before `at` (0 before the first read).
    fn at(&self, at: Instant) -> u64 {
        let samples = self.samples.lock().unwrap();
        let i = samples.partition_point(|(t, _)| *t <= at);
        i.checked_sub(1).map_or(0, |i| samples[i].1)
    }
}

/// An open sale whose admission is paused, with stock for everyone the test admits.
async fn paused_sale(app: &TestApp) -> String {
    let spec = SaleSpec {
        pools: vec![("p1".into(), 200_000)],
        admission_rate: 100.0,
        active_cap: 100_000,
        ..SaleSpec::default()
    };
    let sale = app.open_sale("fresh-", spec).await;
    app.admission(&sale, "pause").await;
    sale
}

/// Hands out tickets up to `last` to nobody: the next client's ticket is `last + 1`.
async fn skip_tickets_to(app: &TestApp, sale: &str, last: u64) {
    let mut redis = app.redis.clone();
    let _: () = redis::cmd("SET")
        .arg(app.keys.sale(sale).seq())
        .arg(last)
        .query_async(&mut redis)
        .await
        .expect("SET the ticket counter");
}

/// How late the gateway may be, on a busy machine, in showing a move of the frontier: the
/// contract's one tick (50 ms in tests) and then some.
const LAG: Duration = Duration::from_secs(1);

/// Every position a client was shown, checked against the truth `LAG` before each moment it
/// stopped being shown (the next message, or `end`): never more than its allowance above it.
fn assert_within_contract(client: &Client, frontier: &Frontier, end: Instant) {
    let positions = client.positions();
    let mut until: Vec<Instant> = positions.iter().skip(1).map(|(at, ..)| *at).collect();
    until.push(end);
    for ((shown_at, position, _), until) in positions.iter().zip(until) {
        let front = frontier.at(until.checked_sub(LAG).unwrap_or(*shown_at));
        if client.ticket <= front {
            continue;
        }
        let truth = client.ticket - front;
        assert!(
            *position <= truth + allowance(truth),
            "ticket {} shown {position} until {:?} after it was sent, when the truth {LAG:?} \
             earlier was {truth} (allowance {})",
            client.ticket,
            until - *shown_at,
            allowance(truth)
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn far_back_a_client_hears_only_grid_steps_and_the_front_hears_every_move(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = paused_sale(&app).await;
    let first = Client::join(&app, &sale).await;
    skip_tickets_to(&app, &sale, 599).await;
    let near = Client::join(&app, &sale).await;
    skip_tickets_to(&app, &sale, 49_999).await;
    let far = Client::join(&app, &sale).await;
    assert_eq!((first.ticket, near.ticket, far.ticket), (1, 600, 50_000));
    // Paused: everyone is told where they stand, without an ETA.
    eventually("everyone placed", Duration::from_secs(10), || async {
        [&first, &near, &far]
            .iter()
            .all(|c| c.positions().last().is_some_and(|p| p.2.is_none()))
    })
    .await;
    assert_eq!(far.positions().last().unwrap().1, 50_000);

    let frontier = Frontier::follow(&app, &sale);
    let resumed = Instant::now();
    app.admission(&sale, "resume").await;
    // Admission is never delayed: the first in line is let in within a few ticks.
    eventually("the first is admitted", Duration::from_secs(5), || async {
        first.admitted().is_some()
    })
    .await;
    // Four seconds of a line moving at 100 a second: about 400 places.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let end = Instant::now();
    let moved = frontier.at(end);
    assert!(moved >= 150, "the line moved ({moved} admitted)");

    // Far back (50,000, where the grid's step is 200) the client was told the resume (its ETA
    // is known again), then only each step of 200 the line moved: a handful of messages where
    // a push of every move would have sent dozens.
    let far_since: Vec<_> = far
        .positions()
        .into_iter()
        .filter(|(at, ..)| *at >= resumed)
        .collect();
    // (A message of the paused room sent as the resume was asked for may arrive first.)
    assert!(
        far_since
            .iter()
            .find(|p| p.2.is_some())
            .is_some_and(|p| p.0 - resumed < Duration::from_secs(2)),
        "the resume reached the far client at once (the heartbeat is 15 s), with an ETA: \
         {far_since:?}"
    );
    let steps = moved / 200 + 1;
    assert!(
        far_since.len() as u64 <= steps + 2,
        "{} messages for {moved} places moved ({steps} grid steps): {far_since:?}",
        far_since.len()
    );
    for (_, position, _) in &far_since {
        assert_eq!(shown(*position), *position, "{position} is on the grid");
    }
    assert!(
        far_since.windows(2).all(|w| w[1].1 <= w[0].1),
        "never up: {far_since:?}"
    );
    assert_within_contract(&far, &frontier, end);

    // At the front every move is told, exactly: the near client heard many distinct places,
    // each one off the grid's steps where the move was smaller than one.
    let near_since: Vec<u64> = near
        .positions()
        .into_iter()
        .filter(|(at, ..)| *at >= resumed)
        .map(|p| p.1)
        .collect();
    assert!(near.ticket <= EXACT_UP_TO);
    assert!(
        near_since.len() >= 10,
        "the front hears each move: {near_since:?}"
    );
    assert_within_contract(&near, &frontier, near.admitted().unwrap_or(end));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_client_whose_place_stands_still_hears_every_heartbeat(db: sqlx::PgPool) {
    let options = TestOptions {
        heartbeat_ms: 300,
        idle_timeout_ms: 3_000,
        ..Default::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = paused_sale(&app).await;
    skip_tickets_to(&app, &sale, 9_999).await;
    let client = Client::join(&app, &sale).await;
    // Paused, nothing moves: each heartbeat is a ping and the same place again, in one write.
    eventually("heartbeats", Duration::from_secs(10), || async {
        client.positions().len() >= 5
    })
    .await;
    let heard = client.heard();
    let positions = client.positions();
    assert!(
        positions.iter().all(|p| (p.1, p.2) == (10_000, None)),
        "{positions:?}"
    );
    let gaps: Vec<Duration> = positions.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        gaps.iter().all(|gap| *gap <= Duration::from_millis(1_500)),
        "a position at least every heartbeat (300 ms; late on a busy machine): {gaps:?}"
    );
    let pings = heard
        .iter()
        .filter(|(_, h)| matches!(h, Heard::Ping))
        .count();
    assert!(
        pings + 1 >= positions.len(),
        "a ping with each heartbeat: {heard:?}"
    );
}

/// Sold out is never held for the heartbeat: a client far back in line, whose place does not
/// move (the room waits on the one seat), hears it as soon as the last seat is paid for, not at
/// its next heartbeat up to 15 s later.
#[sqlx::test(migrations = "../migrations")]
async fn sold_out_reaches_a_client_far_back_at_once(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    // One seat, one admission per seat: the first client is let in, then the room waits.
    let spec = SaleSpec {
        pools: vec![("p1".into(), 1)],
        admission_rate: 100.0,
        stock_factor: 1.0,
        ..SaleSpec::default()
    };
    let sale = app.open_sale("sold-", spec).await;
    let first = Client::join(&app, &sale).await;
    eventually("the first is admitted", Duration::from_secs(10), || async {
        first.token().is_some()
    })
    .await;
    skip_tickets_to(&app, &sale, 49_999).await;
    let far = Client::join(&app, &sale).await;
    eventually("the far client placed", Duration::from_secs(10), || async {
        !far.positions().is_empty()
    })
    .await;

    let hold = app
        .reserve(&sale, &first.token().unwrap(), "k1", "p1", 1)
        .await
        .expect("201");
    app.pay(&sale, &hold.reservation_id, &hold.secret, "succeed")
        .await;
    let paid = Instant::now();
    eventually("sold out is heard", Duration::from_secs(30), || async {
        far.sold_out().is_some()
    })
    .await;
    let late = far.sold_out().unwrap() - paid;
    assert!(
        late < Duration::from_secs(4),
        "sold out reached the far client {late:?} after the payment (its heartbeat is 15 s): \
         {:?}",
        far.heard()
    );
}
