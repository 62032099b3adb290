//! A property test of the reservation lifecycle against the real Redis: random interleavings of
//! reserve (through the durable-201 sequence), retries, a token reused with a new key in another
//! pool, concurrent same-key retries with acks racing aborts, sold-out refusals racing a
//! returned seat, payments (the started one, wrong amounts, strays), failures, expiry, confirm
//! racing expiry, and duplicate or out-of-order webhooks. After every step it checks the pools'
//! counters, every reservation against a model, one live reservation per token, and that no 201
//! was ever given for a hold that was taken back.
//!
//! The broker's side of the durable-201 sequence is a scripted [`EventLog`] here: what is under
//! test is the order of reserve, ack and abort in Redis, with every outcome of a publish and
//! every order of two racing requests. The real broker's part (acks, timeouts, outages) is
//! tested against a real Tansu in `outages.rs` and `booking_api.rs`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use floodgate_booking::catalog;
use floodgate_booking::gatekeeper::{
    Confirmation, Gatekeeper, Hold, Paid, PaymentStart, Release, ReserveError, ReserveRequest,
    WebhookTarget,
};
use floodgate_booking::publish::PublishError;
use floodgate_booking::reservations::{reserve_durably, EventLog, NotReserved};
use floodgate_platform::keys::Keys;
use floodgate_protocol::ids::reservation_id;
use floodgate_protocol::token::AdmissionClaims;
use floodgate_tests::chaos::ChaosProxy;
use floodgate_tests::{redis_url, unique, SaleSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, watch};

const POOLS: [(&str, i64); 2] = [("p1", 8), ("p2", 5)];
const FARE: i64 = 150_000;
const STEPS: usize = 150;
const SEEDS: u64 = 6;
const ACK_WAIT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Held,
    Sold,
    Released,
    Expired,
    Aborted,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Held => "held",
            State::Sold => "sold",
            State::Released => "released",
            State::Expired => "expired",
            State::Aborted => "aborted",
        }
    }
}

/// One admission token and the one request (key, pool, seats) it is bound to once claimed.
struct Token {
    claims: AdmissionClaims,
    key: String,
    pool: &'static str,
    seats: u32,
    /// Its pass holds nothing and is bound to no key: its key's hold was taken back (an abort)
    /// and the key's retry was refused, which gives the pass back at once (issue 28).
    free: bool,
}

struct Reservation {
    token: usize,
    pool: &'static str,
    seats: u32,
    hold: Hold,
    state: State,
    /// The payment that bought it.
    payment: Option<String>,
    /// The payment started for it, the one that may buy it (the first started: a second start
    /// is answered with it).
    started: Option<String>,
}

/// Webhook deliveries made so far, to be delivered again: (reservation, payment, event, success).
type Delivery = (usize, String, String, bool);

/// A scripted broker: each publish announces itself, waits for its gate, then acks or fails.
#[derive(Clone)]
struct Log {
    fail: bool,
    arrived: mpsc::UnboundedSender<()>,
    open: watch::Receiver<bool>,
}

impl Log {
    /// A log that answers at once.
    fn immediate(fail: bool) -> Self {
        let (arrived, _) = mpsc::unbounded_channel();
        let (_, open) = watch::channel(true);
        Self {
            fail,
            arrived,
            open,
        }
    }
}

impl EventLog for Log {
    fn publish(
        &self,
        _sale: &str,
        _pool: &str,
        _event: &str,
    ) -> impl std::future::Future<Output = Result<(), PublishError>> + Send {
        let (arrived, mut open, fail) = (self.arrived.clone(), self.open.clone(), self.fail);
        async move {
            let _ = arrived.send(());
            let _ = open.wait_for(|open| *open).await;
            if fail {
                Err(PublishError::NotAcked(
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::MessageTimedOut,
                    ),
                ))
            } else {
                Ok(())
            }
        }
    }
}

struct World {
    gatekeeper: Gatekeeper,
    /// A connection of the test's own, to read the state the scripts leave.
    redis: floodgate_platform::runtime::RedisConn,
    /// The same gatekeeper through a proxy whose answers a step can hold back.
    slow: Gatekeeper,
    proxy: ChaosProxy,
    keys: Keys,
    sale: String,
    tokens: Vec<Token>,
    reservations: Vec<Reservation>,
    deliveries: Vec<Delivery>,
    /// Events the scripts must have written to the outboxes so far, per pool.
    events: HashMap<&'static str, i64>,
    /// Reservations whose SeatReserved left the outbox (ack.lua ran for them), per pool.
    removed: HashMap<&'static str, HashSet<String>>,
    /// Reservations a 201 was answered for.
    answered: HashSet<String>,
    refunded: HashSet<(usize, String)>,
    next: u64,
}

impl World {
    async fn int(&self, key: &str) -> i64 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.redis.clone())
            .await
            .unwrap();
        v.unwrap_or(0)
    }

    fn seats_in(&self, pool: &str, state: State) -> i64 {
        self.reservations
            .iter()
            .filter(|r| r.pool == pool && r.state == state)
            .map(|r| i64::from(r.seats))
            .sum()
    }

    async fn available(&self, pool: &str) -> i64 {
        self.int(&self.keys.pool(&self.sale, pool).available())
            .await
    }

    async fn check(&self, step: &str) {
        for (pool, capacity) in POOLS {
            let k = self.keys.pool(&self.sale, pool);
            let (available, held, sold) = (
                self.int(&k.available()).await,
                self.int(&k.held()).await,
                self.int(&k.sold()).await,
            );
            assert!(available >= 0, "{step}: {pool}: available went negative");
            assert_eq!(
                available + held + sold,
                capacity,
                "{step}: {pool}: available + held + sold = capacity"
            );
            assert_eq!(
                held,
                self.seats_in(pool, State::Held),
                "{step}: {pool}: held"
            );
            assert_eq!(
                sold,
                self.seats_in(pool, State::Sold),
                "{step}: {pool}: sold"
            );
            let outbox: i64 = redis::cmd("XLEN")
                .arg(k.outbox())
                .query_async(&mut self.redis.clone())
                .await
                .unwrap();
            let removed = self.removed.get(pool).map_or(0, |r| r.len() as i64);
            assert_eq!(
                outbox,
                self.events.get(pool).copied().unwrap_or(0) - removed,
                "{step}: {pool}: one event per change, none for a no-op, acked ones gone"
            );
        }
        let mut live_per_token: HashMap<String, Vec<String>> = HashMap::new();
        for r in &self.reservations {
            let id = &r.hold.reservation_id;
            let stored = self
                .gatekeeper
                .reservation(&self.sale, r.pool, id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                stored.state.lua(),
                r.state.as_str(),
                "{step}: state of {id}"
            );
            if matches!(r.state, State::Held | State::Sold) {
                live_per_token
                    .entry(self.tokens[r.token].claims.jti.clone())
                    .or_default()
                    .push(id.clone());
            }
            if self.answered.contains(id) {
                assert_ne!(
                    r.state,
                    State::Aborted,
                    "{step}: {id} was answered 201 and then taken back"
                );
            }
        }
        for (jti, live) in live_per_token {
            assert_eq!(
                live.len(),
                1,
                "{step}: token {jti} holds more than one live reservation: {live:?}"
            );
        }
    }

    fn target<'a>(&'a self, i: usize, event: &'a str) -> WebhookTarget<'a> {
        let r = &self.reservations[i];
        WebhookTarget {
            sale: &self.sale,
            pool: r.pool,
            reservation_id: &r.hold.reservation_id,
            event,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn new_token(&mut self, rng: &mut StdRng) -> usize {
        let jti = self.fresh("jti");
        let key = self.fresh("key");
        self.tokens.push(Token {
            claims: AdmissionClaims {
                sale: self.sale.clone(),
                ticket: self.next,
                jti,
                max_seats: 2,
                iat_ms: 0,
                exp_ms: floodgate_protocol::now_millis() + 3_600_000,
                buyer: None,
            },
            key,
            pool: POOLS[rng.gen_range(0..POOLS.len())].0,
            seats: rng.gen_range(1..=2),
            free: false,
        });
        self.tokens.len() - 1
    }

    fn record_hold(&mut self, t: usize, hold: Hold, answered: bool) -> usize {
        let pool = self.tokens[t].pool;
        *self.events.entry(pool).or_default() += 1;
        if answered {
            self.answered.insert(hold.reservation_id.clone());
            self.removed
                .entry(pool)
                .or_default()
                .insert(hold.reservation_id.clone());
        }
        self.reservations.push(Reservation {
            token: t,
            pool,
            seats: self.tokens[t].seats,
            hold,
            state: State::Held,
            payment: None,
            started: None,
        });
        self.reservations.len() - 1
    }

    /// Token `t`'s request through the durable-201 sequence with `log`.
    async fn attempt(
        &self,
        gatekeeper: &Gatekeeper,
        t: usize,
        log: &Log,
    ) -> Result<Hold, NotReserved> {
        let token = &self.tokens[t];
        let request = ReserveRequest {
            claims: &token.claims,
            pool: token.pool,
            seats: token.seats,
            idempotency_key: &token.key,
        };
        let id = reservation_id(token.pool, &uuid::Uuid::new_v4().simple().to_string());
        reserve_durably(gatekeeper, log, ACK_WAIT, &request, &id, "secret").await
    }

    /// A new token reserves; its event is acknowledged, or (sometimes) not, and it is aborted.
    async fn reserve(&mut self, rng: &mut StdRng) -> String {
        let t = self.new_token(rng);
        let (pool, seats) = (self.tokens[t].pool, self.tokens[t].seats);
        let available = self.available(pool).await;
        let fail = rng.gen_bool(0.15);
        match self
            .attempt(&self.gatekeeper, t, &Log::immediate(fail))
            .await
        {
            Ok(hold) => {
                assert!(!fail && !hold.replayed, "a 201 without its ack");
                assert!(
                    available >= i64::from(seats),
                    "reserved {seats} of {available}"
                );
                self.record_hold(t, hold, true);
                format!("reserve {pool}/{seats}: 201")
            }
            Err(NotReserved::NotDurable(_)) => {
                assert!(fail);
                // SeatReserved and ReservationAborted, both in the outbox, seats back.
                let id = self.held_id_of(t).await;
                let hold = self.stored_hold(pool, &id).await;
                let i = self.record_hold(t, hold, false);
                self.reservations[i].state = State::Aborted;
                *self.events.entry(pool).or_default() += 1;
                format!("reserve {pool}/{seats}: not acked, aborted")
            }
            Err(NotReserved::Refused(ReserveError::SoldOut { available: a })) => {
                assert!(available < i64::from(seats) && i64::from(a) == available);
                format!("reserve {pool}/{seats}: sold out")
            }
            Err(e) => panic!("reserve failed: {e}"),
        }
    }

    /// The reservation token `t`'s pointer names.
    async fn held_id_of(&self, t: usize) -> String {
        let token = &self.tokens[t];
        let pointer = self
            .keys
            .pool(&self.sale, token.pool)
            .token_reservation(&token.claims.jti);
        let id: Option<String> = redis::cmd("HGET")
            .arg(&pointer)
            .arg("id")
            .query_async(&mut self.redis.clone())
            .await
            .unwrap();
        match id {
            Some(id) => id,
            // An aborted hold's pointer is gone: find its record by token.
            None => {
                let pattern = format!(
                    "{}{{p:{}/{}}}:rsv:*",
                    self.keys.prefix(),
                    self.sale,
                    token.pool
                );
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(&pattern)
                    .query_async(&mut self.redis.clone())
                    .await
                    .unwrap();
                for key in keys {
                    let jti: Option<String> = redis::cmd("HGET")
                        .arg(&key)
                        .arg("jti")
                        .query_async(&mut self.redis.clone())
                        .await
                        .unwrap();
                    let id = key.rsplit(":rsv:").next().unwrap().to_owned();
                    let known = self
                        .reservations
                        .iter()
                        .any(|r| r.hold.reservation_id == id);
                    if jti.as_deref() == Some(token.claims.jti.as_str()) && !known {
                        return id;
                    }
                }
                panic!("no reservation of token {}", token.claims.jti)
            }
        }
    }

    async fn stored_hold(&self, pool: &str, id: &str) -> Hold {
        let stored = self
            .gatekeeper
            .reservation(&self.sale, pool, id)
            .await
            .unwrap()
            .unwrap();
        Hold {
            reservation_id: stored.id,
            secret: stored.secret,
            seats: stored.seats,
            hold_expires_at_ms: stored.hold_expires_at_ms,
            reserved_at_ms: stored.reserved_at_ms,
            outbox_entry: String::new(),
            pending_event: None,
            replayed: false,
            buyer_record: None,
        }
    }

    /// The same request again, same key: the original answer, or afresh after an abort.
    async fn retry(&mut self, t: usize) -> String {
        let last = self
            .reservations
            .iter()
            .rposition(|r| r.token == t)
            .unwrap();
        let (pool, seats) = (self.tokens[t].pool, self.tokens[t].seats);
        let available = self.available(pool).await;
        let got = self
            .attempt(&self.gatekeeper, t, &Log::immediate(false))
            .await;
        if self.reservations[last].state != State::Aborted {
            // Answered 201 before: the same answer, whatever happened to it since.
            let again = got.expect("a retry of an answered reservation replays it");
            let original = &self.reservations[last].hold;
            assert!(again.replayed);
            assert_eq!(
                (
                    &again.reservation_id,
                    &again.secret,
                    again.hold_expires_at_ms
                ),
                (
                    &original.reservation_id,
                    &original.secret,
                    original.hold_expires_at_ms
                ),
                "a retry gets the original answer, whatever happened since"
            );
            return format!("retry {t}: replayed");
        }
        // Taken back before any 201: the same key reserves afresh.
        match got {
            Ok(hold) => {
                assert!(!hold.replayed && available >= i64::from(seats));
                self.record_hold(t, hold, true);
                format!("retry {t}: afresh after an abort")
            }
            Err(NotReserved::Refused(ReserveError::SoldOut { .. })) => {
                assert!(available < i64::from(seats));
                self.tokens[t].free = true;
                format!("retry {t}: sold out")
            }
            Err(e) => panic!("retry {t}: {e}"),
        }
    }

    /// Token `t`, claimed by its own key, tries another pool with a new key: refused, whatever
    /// became of its reservation, unless its pass was given back (then the new key reserves).
    async fn other_pool(&mut self, t: usize) -> String {
        if self.tokens[t].free {
            return self.other_pool_with_a_free_pass(t).await;
        }
        let token = &self.tokens[t];
        let pool = if token.pool == "p1" { "p2" } else { "p1" };
        let request = ReserveRequest {
            claims: &token.claims,
            pool,
            seats: 1,
            idempotency_key: "another-key",
        };
        let id = reservation_id(pool, &uuid::Uuid::new_v4().simple().to_string());
        match self.gatekeeper.reserve(&request, &id, "s").await {
            Err(ReserveError::TokenSpent) => format!("other pool {t}: spent"),
            other => panic!("token {t} made a second reservation or worse: {other:?}"),
        }
    }

    /// Token `t`'s pass holds nothing (its key's retry was refused after an abort): another
    /// class with a fresh key gets a 201 or its own refusal, never `token_spent`.
    async fn other_pool_with_a_free_pass(&mut self, t: usize) -> String {
        let key = self.fresh("key");
        let token = &mut self.tokens[t];
        token.pool = if token.pool == "p1" { "p2" } else { "p1" };
        token.seats = 1;
        token.key = key;
        let pool = token.pool;
        let available = self.available(pool).await;
        match self
            .attempt(&self.gatekeeper, t, &Log::immediate(false))
            .await
        {
            Ok(hold) => {
                assert!(available >= 1 && !hold.replayed);
                self.tokens[t].free = false;
                // Its aborted reservation is no longer the one a retry replays.
                self.record_hold(t, hold, true);
                format!("other pool {t}: 201 with its pass given back")
            }
            Err(NotReserved::Refused(ReserveError::SoldOut { .. })) => {
                assert!(available < 1);
                format!("other pool {t}: sold out, its pass still free")
            }
            Err(e) => panic!("token {t}'s free pass in {pool}: {e}"),
        }
    }

    /// Two requests with one token and key at once, one whose event is acknowledged and one
    /// whose publish fails, ending in either order: whatever happens, a 201 stands.
    async fn race_ack_and_abort(&mut self, rng: &mut StdRng) -> String {
        let t = self.new_token(rng);
        let (pool, seats) = (self.tokens[t].pool, self.tokens[t].seats);
        if self.available(pool).await < i64::from(seats) {
            return format!("no seats to race for in {pool}");
        }
        let (arrived, mut arrivals) = mpsc::unbounded_channel();
        let (open_ack, ack_gate) = watch::channel(false);
        let (open_fail, fail_gate) = watch::channel(false);
        let acking = Log {
            fail: false,
            arrived: arrived.clone(),
            open: ack_gate,
        };
        let failing = Log {
            fail: true,
            arrived,
            open: fail_gate,
        };
        let ack_first = rng.gen_bool(0.5);
        let (ack, fail) = {
            let world = &*self;
            let (done, mut finished) = mpsc::unbounded_channel();
            let ack = async {
                let got = world.attempt(&world.gatekeeper, t, &acking).await;
                let _ = done.send(());
                got
            };
            let fail = async {
                let got = world.attempt(&world.gatekeeper, t, &failing).await;
                let _ = done.send(());
                got
            };
            let order = async {
                // Both have reserved (one made the hold, the other replays it) and wait for the
                // broker; the first to hear back finishes before the second hears anything.
                for _ in 0..2 {
                    arrivals.recv().await.expect("both publish");
                }
                let (first, second) = if ack_first {
                    (&open_ack, &open_fail)
                } else {
                    (&open_fail, &open_ack)
                };
                first.send_replace(true);
                finished.recv().await.expect("the first finishes");
                second.send_replace(true);
            };
            let (ack, fail, ()) = tokio::join!(ack, fail, order);
            (ack, fail)
        };
        match (ack, fail) {
            (Ok(a), Ok(f)) => {
                assert!(ack_first, "no 201 once the hold was taken back");
                assert_eq!(a.reservation_id, f.reservation_id);
                self.record_hold(t, a, true);
                format!("race {pool}: acked, then the failed publish found it durable")
            }
            (Err(NotReserved::NotDurable(_)), Err(NotReserved::NotDurable(_))) => {
                assert!(!ack_first, "a durable hold is never taken back");
                let id = self.held_id_of(t).await;
                let hold = self.stored_hold(pool, &id).await;
                let i = self.record_hold(t, hold, false);
                self.reservations[i].state = State::Aborted;
                *self.events.entry(pool).or_default() += 1;
                // The acking request's ack.lua removed the entry on its way to "aborted".
                self.removed.entry(pool).or_default().insert(id);
                format!("race {pool}: aborted first, no 201")
            }
            other => panic!("race (ack first: {ack_first}): {other:?}"),
        }
    }

    /// A request refused as sold out gives its claim back while its own retry (same key) takes
    /// a seat that just came back: the token must stay spent (issue 12, defect 7).
    async fn race_refusal_and_returned_seat(&mut self, rng: &mut StdRng) -> String {
        let mut pool = None;
        for (p, _) in POOLS {
            let one_seat_hold = self
                .reservations
                .iter()
                .any(|r| r.pool == p && r.state == State::Held && r.seats == 1);
            if one_seat_hold && self.available(p).await == 0 {
                pool = Some(p);
            }
        }
        let Some(pool) = pool else {
            return self.reserve(rng).await;
        };
        let t = self.new_token(rng);
        self.tokens[t].pool = pool;
        self.tokens[t].seats = 1;
        let holder = self
            .reservations
            .iter()
            .position(|r| r.pool == pool && r.state == State::Held && r.seats == 1)
            .unwrap();

        // X: the claim's answer passes, the pool's refusal is held back before X sees it.
        self.proxy.hold_after(1);
        let x = {
            let slow = self.slow.clone();
            let (claims, key) = (self.tokens[t].claims.clone(), self.tokens[t].key.clone());
            let id = reservation_id(pool, &uuid::Uuid::new_v4().simple().to_string());
            tokio::spawn(async move {
                let request = ReserveRequest {
                    claims: &claims,
                    pool,
                    seats: 1,
                    idempotency_key: &key,
                };
                slow.reserve(&request, &id, "x").await
            })
        };
        while self.proxy.waiting() < 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The seat comes back (its payment failed), and Y, X's retry, takes it.
        let payment = self.fresh("pay");
        let payment = self.start_payment(holder, &payment).await;
        let event = self.fresh("evt");
        let released = self
            .gatekeeper
            .release(&self.target(holder, &event), &payment)
            .await
            .unwrap();
        assert_eq!(released, Release::Released);
        self.reservations[holder].state = State::Released;
        *self.events.entry(pool).or_default() += 1;
        let y = self
            .attempt(&self.gatekeeper, t, &Log::immediate(false))
            .await
            .expect("the retry takes the returned seat");
        self.record_hold(t, y, true);
        // Now X hears its refusal and gives back what it takes for an unused claim.
        self.proxy.release();
        let x = x.await.unwrap();
        assert!(matches!(x, Err(ReserveError::SoldOut { .. })), "{x:?}");
        format!("refusal races a returned seat in {pool}")
    }

    /// Starts `payment` for hold `i`: the payment that may buy it now (the one started first).
    async fn start_payment(&mut self, i: usize, payment: &str) -> String {
        let r = &self.reservations[i];
        let candidate = floodgate_tests::started_payment(payment);
        let got = self
            .gatekeeper
            .start_payment(&self.sale, r.pool, &r.hold.reservation_id, &candidate)
            .await
            .unwrap();
        match r.started.clone() {
            Some(first) => {
                let expected = PaymentStart::Started(floodgate_tests::started_payment(&first));
                assert_eq!(got, expected, "a second start of {i}");
                first
            }
            None => {
                assert_eq!(got, PaymentStart::Pending);
                self.reservations[i].started = Some(payment.to_owned());
                payment.to_owned()
            }
        }
    }

    /// Applies what `confirm.lua` must do to the model, and checks the answer.
    fn expect_confirm(&mut self, i: usize, paid: (&str, bool), due: bool, got: &Confirmation) {
        let (payment, right) = paid;
        let r = &mut self.reservations[i];
        let pool = r.pool;
        let mut events = 0;
        if r.state == State::Held && due {
            r.state = State::Expired;
            events += 1;
        }
        let expected = match r.state {
            State::Held if right => {
                r.state = State::Sold;
                r.payment = Some(payment.to_owned());
                events += 1;
                Confirmation::Confirmed
            }
            State::Sold if r.payment.as_deref() == Some(payment) => Confirmation::Confirmed,
            state => {
                if self.refunded.insert((i, payment.to_owned())) {
                    events += 1;
                }
                let reason = match state {
                    State::Held => "wrong_amount",
                    State::Sold => "sold",
                    State::Released => "released",
                    State::Aborted => "aborted",
                    State::Expired => "expired",
                };
                Confirmation::RefundRequired {
                    reason: reason.into(),
                }
            }
        };
        *self.events.entry(pool).or_default() += events;
        assert_eq!(got, &expected, "confirm of {i}");
    }

    async fn confirm(&mut self, i: usize, rng: &mut StdRng) -> String {
        let held = self.reservations[i].state == State::Held;
        // Sometimes the payment that already bought the seat again, under a new event id.
        let mut payment = match (&self.reservations[i].payment, rng.gen_bool(0.3)) {
            (Some(p), true) => p.clone(),
            _ => self.fresh("pay"),
        };
        if held {
            payment = self.start_payment(i, &payment).await;
        }
        // Sometimes the started payment, but for the wrong amount: refunded, the hold stays.
        let right = !rng.gen_bool(0.2);
        let amount = FARE * i64::from(self.reservations[i].seats) - if right { 0 } else { 1 };
        let event = self.fresh("evt");
        let got = self
            .gatekeeper
            .confirm(
                &self.target(i, &event),
                &Paid {
                    payment_id: &payment,
                    amount_minor: amount,
                    currency: "INR",
                },
            )
            .await
            .unwrap();
        self.expect_confirm(i, (&payment, right), false, &got);
        self.deliveries.push((i, payment, event, true));
        format!("confirm {i}")
    }

    async fn fail(&mut self, i: usize, rng: &mut StdRng) -> String {
        let mut payment = self.fresh("pay");
        let held = self.reservations[i].state == State::Held;
        // Sometimes the failure of a payment that is not the one started: it changes nothing.
        let current = held && rng.gen_bool(0.8);
        if current {
            payment = self.start_payment(i, &payment).await;
        }
        let event = self.fresh("evt");
        let got = self
            .gatekeeper
            .release(&self.target(i, &event), &payment)
            .await
            .unwrap();
        let r = &mut self.reservations[i];
        if current {
            assert_eq!(got, Release::Released);
            r.state = State::Released;
            *self.events.entry(r.pool).or_default() += 1;
        } else {
            assert!(
                matches!(got, Release::Ignored(_)),
                "a failure of another payment or on a dead hold changes nothing: {got:?}"
            );
        }
        self.deliveries.push((i, payment, event, false));
        format!("fail {i}")
    }

    async fn redeliver(&mut self, d: usize) -> String {
        let (i, payment, event, success) = self.deliveries[d].clone();
        if success {
            let got = self
                .gatekeeper
                .confirm(
                    &self.target(i, &event),
                    &Paid {
                        payment_id: &payment,
                        amount_minor: FARE,
                        currency: "INR",
                    },
                )
                .await
                .unwrap();
            assert!(matches!(got, Confirmation::Duplicate(_)), "{got:?}");
        } else {
            let got = self
                .gatekeeper
                .release(&self.target(i, &event), &payment)
                .await
                .unwrap();
            assert!(matches!(got, Release::Duplicate(_)), "{got:?}");
        }
        format!("redeliver {d}")
    }

    /// Makes a hold due now, as if its TTL had passed.
    async fn make_due(&self, i: usize) {
        let r = &self.reservations[i];
        let id = &r.hold.reservation_id;
        let past = floodgate_protocol::now_millis() - 1_000;
        let pool = self.keys.pool(&self.sale, r.pool);
        let _: () = redis::pipe()
            .hset(pool.reservation(id), "expires_ms", past)
            .ignore()
            .zadd(pool.expiries(), id, past)
            .ignore()
            .query_async(&mut self.redis.clone())
            .await
            .unwrap();
    }

    async fn expire(&mut self, i: usize) -> String {
        self.make_due(i).await;
        let r = &self.reservations[i];
        let expired = self
            .gatekeeper
            .expire(&self.sale, r.pool, &r.hold.reservation_id)
            .await
            .unwrap();
        let r = &mut self.reservations[i];
        assert_eq!(expired, r.state == State::Held, "only a live hold expires");
        if expired {
            r.state = State::Expired;
            *self.events.entry(r.pool).or_default() += 1;
        }
        format!("expire {i}")
    }

    async fn race_confirm_and_expiry(&mut self, i: usize) -> String {
        let mut payment = self.fresh("pay");
        let was_held = self.reservations[i].state == State::Held;
        if was_held {
            payment = self.start_payment(i, &payment).await;
        }
        self.make_due(i).await;
        let event = self.fresh("evt");
        let amount = FARE * i64::from(self.reservations[i].seats);
        let (sale, pool, id) = (
            self.sale.clone(),
            self.reservations[i].pool,
            self.reservations[i].hold.reservation_id.clone(),
        );
        let target = self.target(i, &event);
        let paid = Paid {
            payment_id: &payment,
            amount_minor: amount,
            currency: "INR",
        };
        let (confirmed, expired) = tokio::join!(
            self.gatekeeper.confirm(&target, &paid),
            self.gatekeeper.expire(&sale, pool, &id),
        );
        let (confirmed, expired) = (confirmed.unwrap(), expired.unwrap());
        // Whichever ran first expired the due hold; the other found it dead. Either way the
        // seats went back exactly once and the payment is refunded.
        if expired {
            assert!(was_held);
            self.reservations[i].state = State::Expired;
            *self.events.entry(pool).or_default() += 1;
            self.expect_confirm(i, (&payment, true), false, &confirmed);
        } else {
            self.expect_confirm(i, (&payment, true), true, &confirmed);
        }
        format!("confirm races expiry {i}")
    }
}

/// A sale for the property test, and the Redis server the slow path's proxy fronts. On a single
/// Redis: any sale, and that Redis. On the cluster pass: a sale whose slots (the sale's and each
/// pool's) one primary serves, and that primary, so a plain connection through the proxy reaches
/// every key the scripts touch, while the fast path goes through the cluster client.
async fn sale_on_one_node(keys: &Keys) -> (String, std::net::SocketAddr) {
    let address = |url: &str| {
        url.trim_start_matches("redis://")
            .trim_end_matches('/')
            .parse()
            .unwrap()
    };
    let seeds = floodgate_tests::redis_cluster_nodes();
    let Some(seed) = seeds.first() else {
        return (unique("prop-"), address(&redis_url()));
    };
    let mut node = redis::Client::open(seed.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // (first slot, last slot, primary's host, port) of every range.
    let ranges: Vec<(u16, u16, (String, u16))> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async::<Vec<redis::Value>>(&mut node)
        .await
        .unwrap()
        .into_iter()
        .map(|range| {
            // [first, last, [host, port, id, ..] of the primary, then the replicas].
            let parts: Vec<redis::Value> = redis::from_redis_value(&range).unwrap();
            let primary: Vec<redis::Value> = redis::from_redis_value(&parts[2]).unwrap();
            (
                redis::from_redis_value(&parts[0]).unwrap(),
                redis::from_redis_value(&parts[1]).unwrap(),
                (
                    redis::from_redis_value(&primary[0]).unwrap(),
                    redis::from_redis_value(&primary[1]).unwrap(),
                ),
            )
        })
        .collect();
    for _ in 0..200 {
        let sale = unique("prop-");
        let mut names = vec![keys.sale(&sale).meta()];
        names.extend(POOLS.iter().map(|(p, _)| keys.pool(&sale, p).config()));
        let mut owners = Vec::new();
        for name in &names {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(name)
                .query_async(&mut node)
                .await
                .unwrap();
            let owner = ranges
                .iter()
                .find(|(first, last, _)| (*first..=*last).contains(&slot))
                .map(|(_, _, primary)| primary.clone())
                .unwrap();
            owners.push(owner);
        }
        if owners.iter().all(|o| *o == owners[0]) {
            let (host, port) = &owners[0];
            return (sale, address(&format!("{host}:{port}")));
        }
    }
    panic!("no sale id whose slots one primary serves in 200 tries");
}

async fn run(db: &sqlx::PgPool, seed: u64) {
    let keys = Keys::new(unique("prop") + ":");
    let redis = floodgate_platform::runtime::connect_redis(&floodgate_tests::redis_args("", None))
        .await
        .unwrap();
    let (sale, upstream) = sale_on_one_node(&keys).await;
    let spec = SaleSpec {
        pools: POOLS
            .iter()
            .map(|(p, c)| (p.to_string(), *c as u32))
            .collect(),
        max_seats: 2,
        ..SaleSpec::default()
    };
    catalog::create_sale(db, &spec.to_file(&sale))
        .await
        .unwrap();
    catalog::arm_sale(db, &redis, &keys, &sale).await.unwrap();
    let proxy = ChaosProxy::start(upstream).await;
    let proxied = floodgate_platform::runtime::connect_redis(&floodgate_tests::redis_args(
        "",
        Some(format!("redis://{}", proxy.addr)),
    ))
    .await
    .unwrap();
    let mut world = World {
        gatekeeper: Gatekeeper::connect(redis.clone(), keys.clone())
            .await
            .unwrap(),
        redis,
        slow: Gatekeeper::connect(proxied, keys.clone()).await.unwrap(),
        proxy,
        keys,
        sale,
        tokens: Vec::new(),
        reservations: Vec::new(),
        deliveries: Vec::new(),
        events: HashMap::new(),
        removed: HashMap::new(),
        answered: HashSet::new(),
        refunded: HashSet::new(),
        next: 0,
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut trail = Vec::new();
    for step in 0..STEPS {
        let n = world.reservations.len();
        let action = if n == 0 { 0 } else { rng.gen_range(0..12) };
        let pick = |rng: &mut StdRng| rng.gen_range(0..n);
        let done = match action {
            0 | 1 => world.reserve(&mut rng).await,
            2 => {
                let t = world.reservations[pick(&mut rng)].token;
                world.retry(t).await
            }
            3 => world.confirm(pick(&mut rng), &mut rng).await,
            4 => world.fail(pick(&mut rng), &mut rng).await,
            5 => world.expire(pick(&mut rng)).await,
            6 => world.race_confirm_and_expiry(pick(&mut rng)).await,
            7 => {
                let t = world.reservations[pick(&mut rng)].token;
                world.other_pool(t).await
            }
            8 => world.race_ack_and_abort(&mut rng).await,
            9 => world.race_refusal_and_returned_seat(&mut rng).await,
            _ if !world.deliveries.is_empty() => {
                let d = rng.gen_range(0..world.deliveries.len());
                world.redeliver(d).await
            }
            _ => world.reserve(&mut rng).await,
        };
        trail.push(done);
        world
            .check(&format!(
                "seed {seed} step {step} after {:?}",
                &trail[trail.len().saturating_sub(5)..]
            ))
            .await;
    }
    // What the seed exercised, for whoever reads the output: the races must actually happen.
    let count = |what: &str| trail.iter().filter(|t| t.contains(what)).count();
    eprintln!(
        "seed {seed}: {} reserved, {} aborted, {} refusal races, {} ack/abort races ({} aborted first), {} other-pool refusals",
        count(": 201"),
        count("not acked"),
        count("refusal races"),
        count("race p"),
        count("aborted first"),
        count("other pool"),
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn random_interleavings_keep_every_invariant(db: sqlx::PgPool) {
    for seed in 0..SEEDS {
        run(&db, seed).await;
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn the_reaper_drops_an_index_entry_whose_reservation_is_gone(db: sqlx::PgPool) {
    let keys = Keys::new(unique("prop") + ":");
    let redis = floodgate_platform::runtime::connect_redis(&floodgate_tests::redis_args("", None))
        .await
        .unwrap();
    let sale = unique("stray-");
    catalog::create_sale(&db, &SaleSpec::default().to_file(&sale))
        .await
        .unwrap();
    catalog::arm_sale(&db, &redis, &keys, &sale).await.unwrap();
    let gatekeeper = Gatekeeper::connect(redis.clone(), keys.clone())
        .await
        .unwrap();
    let stray = reservation_id("p1", &"0".repeat(32));
    let expiries = keys.pool(&sale, "p1").expiries();
    let _: i64 = redis::cmd("ZADD")
        .arg(&expiries)
        .arg(0)
        .arg(&stray)
        .query_async(&mut redis.clone())
        .await
        .unwrap();

    assert!(
        !gatekeeper.expire(&sale, "p1", &stray).await.unwrap(),
        "nothing to expire"
    );
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(&expiries)
        .arg(&stray)
        .query_async(&mut redis.clone())
        .await
        .unwrap();
    assert_eq!(
        score, None,
        "the stray entry is gone, so the reaper does not come back to it"
    );
}
