//! One simulated person: joins the waiting room through `floodgate_client` (which keeps the
//! place across drops and drains, as the protocol says), tries the pools in a random order until
//! one holds the seats, then pays or walks away.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use floodgate_client::booking::sandbox_checkout;
use floodgate_client::door;
use floodgate_client::room::{wait_in_line, Line, Waited};
use floodgate_client::{BookingClient, Failure};
use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::api::code;
use rand::seq::SliceRandom;
use rand::Rng;
use serde::Serialize;

use super::SaleArgs;

/// What became of one person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Told the sale was sold out while waiting.
    SoldOut,
    /// Admitted, but every pool refused (sold out) before a hold was taken.
    NothingLeft,
    /// Held seats and paid.
    Paid,
    /// Held seats and walked away.
    WalkedAway,
    /// Something went wrong (connection, an unexpected answer): counted, never hidden.
    Failed(String),
}

/// One person's run.
#[derive(Clone, Debug, Serialize)]
pub struct Person {
    pub ticket: u64,
    pub prequeue: bool,
    /// The admission batch's expiry (`exp_ms` of the token): equal within a batch, rising
    /// from one batch to the next.
    pub batch: Option<i64>,
    pub outcome: Outcome,
    /// The reservation the booking API answered 201 for: id, pool, seats.
    pub reservation: Option<(String, String, u32)>,
    #[serde(skip)]
    pub(crate) admitted_after: Option<Duration>,
    #[serde(skip)]
    pub(crate) reserve_latency: Option<Duration>,
    /// When the 201 came (Unix ms).
    #[serde(skip)]
    pub(crate) held_at_ms: Option<i64>,
}

/// Live counts for the progress line.
#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) joined: AtomicU64,
    pub(crate) admitted: AtomicU64,
    pub(crate) held: AtomicU64,
    pub(crate) paid: AtomicU64,
    pub(crate) sold_out: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl Person {
    pub(crate) fn failed(ticket: u64, why: &str) -> Self {
        Person {
            ticket,
            prequeue: false,
            batch: None,
            outcome: Outcome::Failed(why.to_owned()),
            reservation: None,
            admitted_after: None,
            reserve_latency: None,
            held_at_ms: None,
        }
    }
}

/// Attempts at one reservation before giving up: 503s are retried with the same key.
const RESERVE_ATTEMPTS: u32 = 20;

/// One person's whole run.
pub(crate) async fn person(
    args: &SaleArgs,
    http: &reqwest::Client,
    progress: &Progress,
    pools: &[String],
    joining: &tokio::sync::Semaphore,
    source: IpAddr,
    gateway: usize,
) -> Person {
    let mut permit = Some(joining.acquire().await.expect("never closed"));
    let joined = Instant::now();
    let mut gateways = args.gateways.clone();
    let first = gateway % gateways.len().max(1);
    gateways.rotate_left(first);
    let door = match at_the_door(args, http, gateways[0]).await {
        Ok(door) => door,
        Err(why) => {
            return Person::failed(0, &why).ends(Outcome::Failed(why.clone()), &progress.failed)
        }
    };
    let mut line = Line::new(&gateways, &args.sale);
    line.from = Some(source);
    line.identity = door.identity.as_deref();
    line.challenge = door.answer;
    let waited = wait_in_line(&mut line, || {
        permit.take();
        progress.joined.fetch_add(1, Ordering::Relaxed);
    })
    .await;
    let mut me = Person::failed(0, "no ticket");
    if let Some(ticket) = &line.ticket {
        me.ticket = ticket.ticket;
        me.prequeue = ticket.draw_nonce.is_some();
    }
    let token = match waited {
        Waited::Admitted(token) => token,
        Waited::SoldOut => return me.ends(Outcome::SoldOut, &progress.sold_out),
        Waited::Failed(why) => return me.ends(Outcome::Failed(why), &progress.failed),
        // Nobody else holds a person's token in a rush: that would be a gateway's mistake.
        Waited::Elsewhere => {
            let why = "the place was taken over by another session".to_owned();
            return me.ends(Outcome::Failed(why), &progress.failed);
        }
    };
    progress.admitted.fetch_add(1, Ordering::Relaxed);
    me.admitted_after = Some(joined.elapsed());
    let claims = floodgate_client::claims(&token);
    me.batch = claims.as_ref().map(|c| c.exp_ms);
    let max_seats = claims.map_or(1, |c| c.max_seats).min(args.seats).max(1);
    let seats = rand::thread_rng().gen_range(1..=max_seats);
    if args.think_ms > 0 {
        let think = args.think_ms as f64 * rand::thread_rng().gen_range(0.5..1.5);
        tokio::time::sleep(Duration::from_millis(think as u64)).await;
    }
    let mut booking = BookingClient::new(http.clone(), args.booking);
    if let Some(identity) = &door.identity {
        booking = booking.signed_in(identity.clone());
    }
    let asked = Instant::now();
    let held = reserve_any(&booking, &args.sale, &token, pools, seats).await;
    me.reserve_latency = Some(asked.elapsed());
    let created = match held {
        Ok(Some(created)) => created,
        Ok(None) => return me.ends(Outcome::NothingLeft, &progress.sold_out),
        Err(e) => return me.ends(Outcome::Failed(format!("reserve: {e}")), &progress.failed),
    };
    progress.held.fetch_add(1, Ordering::Relaxed);
    me.held_at_ms = Some(floodgate_protocol::now_millis());
    me.reservation = Some((created.reservation_id.clone(), created.pool.clone(), seats));
    if !rand::thread_rng().gen_bool(args.pay_ratio.clamp(0.0, 1.0)) {
        me.outcome = Outcome::WalkedAway;
        return me;
    }
    match pay(&booking, http, args, &created).await {
        Ok(()) => me.ends(Outcome::Paid, &progress.paid),
        Err(e) => me.ends(Outcome::Failed(format!("pay: {e}")), &progress.failed),
    }
}

/// What a person shows at the sale's door: an identity (signed in at the stand-in, if asked to)
/// and the answer to its bot check (if it has one).
struct AtTheDoor {
    identity: Option<String>,
    answer: Option<String>,
}

/// Numbers the people who sign in, so each is a buyer of their own.
static SIGNED_IN: AtomicU64 = AtomicU64::new(0);

async fn at_the_door(
    args: &SaleArgs,
    http: &reqwest::Client,
    gateway: std::net::SocketAddr,
) -> Result<AtTheDoor, String> {
    let identity = match args.signin {
        Some(signin) => {
            let n = SIGNED_IN.fetch_add(1, Ordering::Relaxed);
            let sub = format!("{}-{n}", args.sale);
            Some(
                door::standin_identity(http, signin, &sub)
                    .await
                    .map_err(|e| format!("sign-in: {e}"))?,
            )
        }
        None => None,
    };
    let rules = door::door(http, gateway, &args.sale)
        .await
        .map_err(|e| format!("door: {e}"))?;
    let answer = door::answer(http, gateway, &args.sale, &rules)
        .await
        .map_err(|e| format!("bot check: {e}"))?;
    Ok(AtTheDoor { identity, answer })
}

impl Person {
    /// This person's run ends with `outcome`, counted in `counter`.
    fn ends(mut self, outcome: Outcome, counter: &AtomicU64) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        self.outcome = outcome;
        self
    }
}

/// Tries `pools` in a random order until one holds the seats: the 201, or `None` if every
/// pool is sold out.
async fn reserve_any(
    booking: &BookingClient,
    sale: &str,
    token: &str,
    pools: &[String],
    seats: u32,
) -> Result<Option<ReservationCreated>, Failure> {
    let mut order = pools.to_vec();
    order.shuffle(&mut rand::thread_rng());
    for pool in &order {
        match booking
            .reserve_retrying(sale, token, pool, seats, RESERVE_ATTEMPTS)
            .await
        {
            Ok(created) => return Ok(Some(created)),
            Err(refused) if (refused.status(), refused.code()) == (409, code::SOLD_OUT) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Starts the payment and completes it at the sandbox provider.
async fn pay(
    booking: &BookingClient,
    http: &reqwest::Client,
    args: &SaleArgs,
    created: &ReservationCreated,
) -> Result<(), Failure> {
    let started = booking
        .start_payment(&args.sale, &created.reservation_id, &created.secret)
        .await?;
    let checkout = serde_json::json!({ "outcome": "succeed" });
    sandbox_checkout(http, args.sandbox, &started.payment_id, &checkout).await?;
    Ok(())
}
