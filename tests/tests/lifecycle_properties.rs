//! A property test of the reservation lifecycle against the real Redis: random interleavings of
//! reserve, retry, confirm, fail, expire, confirm racing expiry, and duplicate or out-of-order
//! webhooks, with the pool's invariants and a model of every reservation checked after each step.

use std::collections::HashMap;

use floodgate_booking::catalog;
use floodgate_booking::gatekeeper::{
    Confirmation, Gatekeeper, Hold, Release, ReserveRequest, WebhookTarget,
};
use floodgate_contract::ids::reservation_id;
use floodgate_contract::keys::Keys;
use floodgate_contract::token::AdmissionClaims;
use floodgate_tests::{redis_url, unique, SaleSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CAPACITY: i64 = 12;
const STEPS: usize = 150;
const SEEDS: u64 = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Held,
    Sold,
    Released,
    Expired,
}

struct Reservation {
    claims: AdmissionClaims,
    key: String,
    seats: u32,
    hold: Hold,
    state: State,
    payment: Option<String>,
}

/// Webhook deliveries made so far, to be delivered again: (reservation, payment, event, success).
type Delivery = (usize, String, String, bool);

struct World {
    gatekeeper: Gatekeeper,
    keys: Keys,
    sale: String,
    reservations: Vec<Reservation>,
    deliveries: Vec<Delivery>,
    /// Events the scripts must have written to the outbox so far.
    events: i64,
    refunded: HashMap<(usize, String), ()>,
    next: u64,
}

impl World {
    fn pool(&self) -> floodgate_contract::keys::PoolKeys {
        self.keys.pool(&self.sale, "p1")
    }

    async fn int(&self, key: &str) -> i64 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.gatekeeper.redis())
            .await
            .unwrap();
        v.unwrap_or(0)
    }

    fn seats_in(&self, state: State) -> i64 {
        self.reservations
            .iter()
            .filter(|r| r.state == state)
            .map(|r| i64::from(r.seats))
            .sum()
    }

    async fn check(&self, step: &str) {
        let pool = self.pool();
        let (available, held, sold) = (
            self.int(&pool.available()).await,
            self.int(&pool.held()).await,
            self.int(&pool.sold()).await,
        );
        assert!(available >= 0, "{step}: available went negative");
        assert_eq!(
            available + held + sold,
            CAPACITY,
            "{step}: available + held + sold = capacity"
        );
        assert_eq!(held, self.seats_in(State::Held), "{step}: held seats");
        assert_eq!(sold, self.seats_in(State::Sold), "{step}: sold seats");
        for r in &self.reservations {
            let stored = self
                .gatekeeper
                .reservation(&self.sale, "p1", &r.hold.reservation_id)
                .await
                .unwrap()
                .unwrap();
            let expected = match r.state {
                State::Held => "held",
                State::Sold => "sold",
                State::Released => "released",
                State::Expired => "expired",
            };
            assert_eq!(
                stored.state, expected,
                "{step}: state of {}",
                r.hold.reservation_id
            );
        }
        let outbox: i64 = redis::cmd("XLEN")
            .arg(pool.outbox())
            .query_async(&mut self.gatekeeper.redis())
            .await
            .unwrap();
        assert_eq!(
            outbox, self.events,
            "{step}: one event per change, none for a no-op"
        );
    }

    fn target<'a>(&'a self, id: &'a str, event: &'a str) -> WebhookTarget<'a> {
        WebhookTarget {
            sale: &self.sale,
            pool: "p1",
            reservation_id: id,
            event,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    async fn reserve(&mut self, rng: &mut StdRng) -> String {
        let seats = rng.gen_range(1..=2);
        let jti = self.fresh("jti");
        let claims = AdmissionClaims {
            sale: self.sale.clone(),
            ticket: self.next,
            jti,
            max_seats: 2,
            iat_ms: 0,
            exp_ms: i64::MAX,
        };
        let key = self.fresh("key");
        let id = reservation_id("p1", &format!("{:032x}", self.next));
        let available = self.int(&self.pool().available()).await;
        let request = ReserveRequest {
            claims: &claims,
            pool: "p1",
            seats,
            idempotency_key: &key,
        };
        match self.gatekeeper.reserve(&request, &id, "secret").await {
            Ok(hold) => {
                assert!(
                    available >= i64::from(seats),
                    "reserved {seats} with {available} left"
                );
                assert!(!hold.replayed);
                self.events += 1;
                self.reservations.push(Reservation {
                    claims,
                    key,
                    seats,
                    hold,
                    state: State::Held,
                    payment: None,
                });
                format!("reserve {seats}: ok")
            }
            Err(floodgate_booking::gatekeeper::ReserveError::SoldOut { available: a }) => {
                assert!(
                    available < i64::from(seats) && i64::from(a) == available,
                    "refused with {available} left"
                );
                format!("reserve {seats}: sold out")
            }
            Err(e) => panic!("reserve failed: {e}"),
        }
    }

    async fn retry(&mut self, i: usize) -> String {
        let r = &self.reservations[i];
        let request = ReserveRequest {
            claims: &r.claims,
            pool: "p1",
            seats: r.seats,
            idempotency_key: &r.key,
        };
        let again = self
            .gatekeeper
            .reserve(&request, "p1~ffffffffffffffffffffffffffffffff", "other")
            .await
            .unwrap();
        assert!(again.replayed);
        assert_eq!(
            (
                &again.reservation_id,
                &again.secret,
                again.seats,
                again.hold_expires_at_ms
            ),
            (
                &r.hold.reservation_id,
                &r.hold.secret,
                r.hold.seats,
                r.hold.hold_expires_at_ms
            ),
            "a retry gets the original answer, whatever happened since"
        );
        format!("retry {i}")
    }

    /// Applies what `confirm.lua` must do to the model, and checks the answer.
    fn expect_confirm(&mut self, i: usize, payment: &str, due: bool, got: &Confirmation) {
        let r = &mut self.reservations[i];
        if r.state == State::Held && due {
            r.state = State::Expired;
            self.events += 1;
        }
        let expected = match r.state {
            State::Held => {
                r.state = State::Sold;
                r.payment = Some(payment.to_owned());
                self.events += 1;
                Confirmation::Confirmed
            }
            State::Sold if r.payment.as_deref() == Some(payment) => Confirmation::Confirmed,
            state => {
                if self.refunded.insert((i, payment.to_owned()), ()).is_none() {
                    self.events += 1;
                }
                let lost_to = match state {
                    State::Sold => "sold",
                    State::Released => "released",
                    _ => "expired",
                };
                Confirmation::RefundRequired {
                    lost_to: lost_to.into(),
                }
            }
        };
        assert_eq!(got, &expected, "confirm of {i}");
    }

    async fn confirm(&mut self, i: usize, rng: &mut StdRng) -> String {
        // Sometimes the payment that already bought the seat again, under a new event id.
        let payment = match (&self.reservations[i].payment, rng.gen_bool(0.3)) {
            (Some(p), true) => p.clone(),
            _ => self.fresh("pay"),
        };
        let event = self.fresh("evt");
        let id = self.reservations[i].hold.reservation_id.clone();
        let got = self
            .gatekeeper
            .confirm(&self.target(&id, &event), &payment)
            .await
            .unwrap();
        self.expect_confirm(i, &payment, false, &got);
        self.deliveries.push((i, payment, event, true));
        format!("confirm {i}")
    }

    async fn fail(&mut self, i: usize) -> String {
        let payment = self.fresh("pay");
        let event = self.fresh("evt");
        let id = self.reservations[i].hold.reservation_id.clone();
        let got = self
            .gatekeeper
            .release(&self.target(&id, &event), &payment)
            .await
            .unwrap();
        let r = &mut self.reservations[i];
        if r.state == State::Held {
            assert_eq!(got, Release::Released);
            r.state = State::Released;
            self.events += 1;
        } else {
            assert!(
                matches!(got, Release::Ignored(_)),
                "a failure on a dead hold changes nothing: {got:?}"
            );
        }
        self.deliveries.push((i, payment, event, false));
        format!("fail {i}")
    }

    async fn redeliver(&mut self, d: usize) -> String {
        let (i, payment, event, success) = self.deliveries[d].clone();
        let id = self.reservations[i].hold.reservation_id.clone();
        if success {
            let got = self
                .gatekeeper
                .confirm(&self.target(&id, &event), &payment)
                .await
                .unwrap();
            assert!(matches!(got, Confirmation::Duplicate(_)), "{got:?}");
        } else {
            let got = self
                .gatekeeper
                .release(&self.target(&id, &event), &payment)
                .await
                .unwrap();
            assert!(matches!(got, Release::Duplicate(_)), "{got:?}");
        }
        format!("redeliver {d}")
    }

    /// Makes a hold due now, as if its TTL had passed.
    async fn make_due(&self, i: usize) {
        let id = &self.reservations[i].hold.reservation_id;
        let past = floodgate_contract::now_millis() - 1_000;
        let pool = self.pool();
        let _: () = redis::pipe()
            .hset(pool.reservation(id), "expires_ms", past)
            .ignore()
            .zadd(pool.expiries(), id, past)
            .ignore()
            .query_async(&mut self.gatekeeper.redis())
            .await
            .unwrap();
    }

    async fn expire(&mut self, i: usize) -> String {
        self.make_due(i).await;
        let id = self.reservations[i].hold.reservation_id.clone();
        let expired = self.gatekeeper.expire(&self.sale, "p1", &id).await.unwrap();
        let r = &mut self.reservations[i];
        assert_eq!(expired, r.state == State::Held, "only a live hold expires");
        if expired {
            r.state = State::Expired;
            self.events += 1;
        }
        format!("expire {i}")
    }

    async fn race(&mut self, i: usize) -> String {
        self.make_due(i).await;
        let payment = self.fresh("pay");
        let event = self.fresh("evt");
        let id = self.reservations[i].hold.reservation_id.clone();
        let was_held = self.reservations[i].state == State::Held;
        let target = self.target(&id, &event);
        let (confirmed, expired) = tokio::join!(
            self.gatekeeper.confirm(&target, &payment),
            self.gatekeeper.expire(&self.sale, "p1", &id),
        );
        let (confirmed, expired) = (confirmed.unwrap(), expired.unwrap());
        // Whichever ran first expired the due hold; the other found it dead. Either way the
        // seats went back exactly once and the payment is refunded.
        if expired {
            assert!(was_held);
            self.reservations[i].state = State::Expired;
            self.events += 1;
            self.expect_confirm(i, &payment, false, &confirmed);
        } else {
            self.expect_confirm(i, &payment, true, &confirmed);
        }
        format!("race {i}")
    }
}

async fn run(db: &sqlx::PgPool, seed: u64) {
    let keys = Keys::new(unique("prop") + ":");
    let redis = floodgate_contract::runtime::connect_redis(&redis_url())
        .await
        .unwrap();
    let sale = unique("prop-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), CAPACITY as u32)],
        max_seats: 2,
        ..SaleSpec::default()
    };
    catalog::create_sale(db, &spec.to_file(&sale))
        .await
        .unwrap();
    catalog::arm_sale(db, &redis, &keys, &sale).await.unwrap();
    let mut world = World {
        gatekeeper: Gatekeeper::connect(redis, keys.clone()).await.unwrap(),
        keys,
        sale,
        reservations: Vec::new(),
        deliveries: Vec::new(),
        events: 0,
        refunded: HashMap::new(),
        next: 0,
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut trail = Vec::new();
    for step in 0..STEPS {
        let n = world.reservations.len();
        let action = if n == 0 { 0 } else { rng.gen_range(0..8) };
        let pick = |rng: &mut StdRng| rng.gen_range(0..n);
        let done = match action {
            0 | 1 => world.reserve(&mut rng).await,
            2 => world.retry(pick(&mut rng)).await,
            3 => world.confirm(pick(&mut rng), &mut rng).await,
            4 => world.fail(pick(&mut rng)).await,
            5 => world.expire(pick(&mut rng)).await,
            6 => world.race(pick(&mut rng)).await,
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
    let redis = floodgate_contract::runtime::connect_redis(&redis_url())
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
