//! What a stranger's requests may cost the booking service, in the service itself (an edge can
//! be bypassed or misconfigured): every check is a lookup in this process's memory, made before
//! any Redis work, and none keeps state in Redis (a sale's slot is the one place every join
//! meets).
//!
//! - Each client address (platform::clients: behind the edge, the client it forwards for; an
//!   IPv6 client as its prefix) has an allowance of writes (starting a payment, and reservations
//!   whose pass does not check: `FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP`) and one of reads (a
//!   reservation, a buyer's list: `FLOODGATE_BOOKING_READS_PER_SEC_PER_IP`): 429
//!   `booking_rate_limited`. A reservation with a pass that checks is held to the pass's
//!   allowance alone, so a stranger sending junk from a carrier's address cannot spend the
//!   allowance of the people behind it. A held reservation's page reads it every 1.5 s, so reads
//!   are allowed far more. Both are sized for a carrier's address with hundreds of people behind
//!   it, and stop a script. A pass without the edge's seal, where the services seal
//!   (platform::clients::seal), is a stranger's (or sealed with a key rotated out): it pays its
//!   address's allowance before its signature is checked, and one that fails its network's
//!   share (an IPv4 /24, an IPv6 /56 and /48, each as one); a network that spends its share
//!   has its unsealed passes refused before any check for a second (`Limits::unsealed`).
//! - Each pass (a sale's admission token, by its id) may try reservations
//!   `FLOODGATE_RESERVATIONS_PER_SEC_PER_PASS` times a second: 429 `reservation_rate_limited`.
//!   A person makes one reservation, retries a 503 after its `Retry-After`, or tries another
//!   class after a sell-out: a few requests. A replay flood of one pass from many connections
//!   is stopped here, whatever addresses it comes from.
//! - A reservation's holder (a secret its key proves: crate::holders) may read it and start
//!   paying `FLOODGATE_HOLDER_REQUESTS_PER_SEC` times a second, in bursts of twice that: 429
//!   `holder_rate_limited`. Its page reads it every 1.5 s; a person pays once or twice. A
//!   secret the key does not prove spends its address's writes or reads instead, so the
//!   holders behind one carrier's address keep theirs whatever junk a stranger there sends.
//!   A signed-in buyer's list of their reservations (a query of the durable record each) is
//!   held to the same allowance per buyer and sale, once their identity checks.
//! - The webhook is never refused for its rate while its signature is valid: only deliveries
//!   whose signature fails count against their address
//!   (`FLOODGATE_WEBHOOK_FAILURES_PER_SEC_PER_IP`), and past it such a delivery is answered 429
//!   `webhook_rate_limited`. Checking one costs one HMAC over at most 4 KiB either way.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use floodgate_platform::autopilot::window::pass_key;
use floodgate_platform::clients::{AddressRate, ClientAddress, Rate};
use floodgate_protocol::api::code;
use floodgate_protocol::token::AdmissionClaims;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::ApiError;
use crate::AppState;

/// The booking service's limits.
pub struct Limits {
    per_address: AddressRate,
    /// Passes the edge's seal does not vouch for whose check failed, by address and network (a
    /// share).
    unsealed_failures: AddressRate,
    /// The networks whose share of those ran out, and when (`FLOODED_FOR`).
    flooded: std::sync::Mutex<std::collections::HashMap<IpAddr, std::time::Instant>>,
    reads_per_address: AddressRate,
    per_pass: Rate<u64>,
    per_holder: Rate<u64>,
    per_buyer: Rate<u64>,
    webhook_failures: AddressRate,
}

impl Limits {
    pub fn new(config: &Config) -> Self {
        Self {
            per_address: AddressRate::per_second(config.requests_per_sec_per_ip),
            unsealed_failures: AddressRate::share(config.requests_per_sec_per_ip),
            flooded: Default::default(),
            reads_per_address: AddressRate::per_second(config.reads_per_sec_per_ip),
            per_pass: Rate::per_second(config.reservations_per_sec_per_pass),
            per_holder: Rate::per_second(config.holder_requests_per_sec),
            per_buyer: Rate::per_second(config.holder_requests_per_sec),
            webhook_failures: AddressRate::per_second(config.webhook_failures_per_sec_per_ip),
        }
    }

    /// One request of `client` on a page's path, or its refusal.
    pub fn address(&self, client: IpAddr) -> Result<(), ApiError> {
        if self.per_address.allow(&client) {
            return Ok(());
        }
        Err(limited(
            code::BOOKING_RATE_LIMITED,
            "too many booking requests from this address; retry in a second",
        ))
    }

    /// A pass of `client` the edge's seal does not vouch for, before its signature is checked:
    /// refused if its network's junk spent the network's share lately, else charged to its
    /// address. So junk from a network of addresses (a /48 holds 65,536 as they are counted)
    /// costs about one share's checks, and a genuine pass sealed with a key rotated out still
    /// books at its address's price wherever no one floods its network.
    pub fn unsealed(&self, client: IpAddr) -> Result<(), ApiError> {
        let flooded = self.flooded.lock().expect("flooded networks");
        if flooded
            .get(&floodgate_platform::clients::share_network(client))
            .is_some_and(|at| at.elapsed() < FLOODED_FOR)
        {
            return Err(from_a_flooded_network());
        }
        drop(flooded);
        self.address(client)
    }

    /// A pass of `client` without the edge's seal whose check failed: its network's share, and
    /// once that is spent the network is refused unsealed passes for [`FLOODED_FOR`].
    pub fn unsealed_failed(&self, client: IpAddr) -> Result<(), ApiError> {
        if self.unsealed_failures.allow(&client) {
            return Ok(());
        }
        let mut flooded = self.flooded.lock().expect("flooded networks");
        flooded.insert(
            floodgate_platform::clients::share_network(client),
            std::time::Instant::now(),
        );
        Err(from_a_flooded_network())
    }

    /// One read of `client` (a reservation, a buyer's list), or its refusal.
    pub fn read(&self, client: IpAddr) -> Result<(), ApiError> {
        if self.reads_per_address.allow(&client) {
            return Ok(());
        }
        Err(limited(
            code::BOOKING_RATE_LIMITED,
            "too many reads from this address; retry in a second",
        ))
    }

    /// One reservation attempt of the pass `claims`, or its refusal.
    pub fn pass(&self, claims: &AdmissionClaims) -> Result<(), ApiError> {
        if self.per_pass.allow(&pass_key(&claims.sale, &claims.jti)) {
            return Ok(());
        }
        Err(limited(
            code::RESERVATION_RATE_LIMITED,
            "this pass is used too fast; retry with the same Idempotency-Key in a second",
        ))
    }

    /// One request of the holder of reservation `id` of `sale` (its secret proven), or its
    /// refusal.
    pub fn holder(&self, sale: &str, id: &str) -> Result<(), ApiError> {
        if self.per_holder.allow(&pass_key(sale, id)) {
            return Ok(());
        }
        Err(limited(
            code::HOLDER_RATE_LIMITED,
            "this reservation is asked about too fast; retry in a second",
        ))
    }

    /// One listing of the signed-in `buyer`'s reservations (in any sale), or its refusal: each
    /// is a query of PostgreSQL, whose few connections the service's other work needs too. The
    /// buyer's one allowance whatever sale it names: a sale id is the asker's to make up, so
    /// an allowance per sale would be as many allowances as ids.
    pub fn buyer(&self, buyer: &str) -> Result<(), ApiError> {
        if self.per_buyer.allow(&pass_key("", buyer)) {
            return Ok(());
        }
        Err(limited(
            code::HOLDER_RATE_LIMITED,
            "this buyer's reservations are asked about too fast; retry in a second",
        ))
    }

    /// Whether `client` may be told why its delivery's signature failed, or is past its
    /// allowance of failures (then the answer is 429).
    pub fn webhook_failed(&self, client: IpAddr) -> Result<(), ApiError> {
        if self.webhook_failures.allow(&client) {
            return Ok(());
        }
        Err(limited(
            code::WEBHOOK_RATE_LIMITED,
            "too many deliveries with a bad signature from this address",
        ))
    }

    /// Forgets what has not asked lately.
    fn prune(&self) {
        self.per_address.prune();
        self.unsealed_failures.prune();
        self.flooded
            .lock()
            .expect("flooded networks")
            .retain(|_, at| at.elapsed() < FLOODED_FOR);
        self.reads_per_address.prune();
        self.per_pass.prune();
        self.per_holder.prune();
        self.per_buyer.prune();
        self.webhook_failures.prune();
    }

    /// Prunes once a minute until `shutdown`.
    pub async fn keep_pruned(self: Arc<Self>, shutdown: CancellationToken) {
        let mut every = floodgate_platform::service::Every::new(Duration::from_secs(60), shutdown);
        while every.tick().await {
            self.prune();
        }
    }
}

/// How long a network whose unsealed passes spent its share of failures is refused them before
/// any check: the share refills in that time.
const FLOODED_FOR: Duration = Duration::from_secs(1);

fn from_a_flooded_network() -> ApiError {
    limited(
        code::BOOKING_RATE_LIMITED,
        "too many passes that do not check from this network; retry in a second",
    )
}

fn limited(code: &'static str, message: &str) -> ApiError {
    metrics::counter!("floodgate_requests_limited_total", "code" => code).increment(1);
    ApiError::new(code, message.into())
}

/// A reservation's pass, checked (`Admitted`) before anything else of the request is read, its
/// key and body included: one that checks is held to its own allowance (`Limits::pass`), never
/// to its address's, so the people behind one carrier's address each keep theirs whatever a
/// stranger there sends; one that fails counts against its address, and past the allowance is
/// answered 429 instead. Checking a pass is one signature check (CPU, no Redis). Where the
/// services seal what they issue for the edge (platform::clients::seal), a pass without this
/// key's seal (an MD5) is a stranger's, or sealed with a key rotated out: it pays its address's
/// allowance before its signature is checked and, failing, its network's share, so junk from a
/// /48 costs about one share of checks, not 65,536 addresses' (`Limits::unsealed`).
/// A pass bound to a buyer is checked against its buyer's identity after its allowance: junk
/// identities sent with a genuine pass cost their check at the pass's rate only.
pub struct AllowedPass(pub crate::extract::Admitted);

impl FromRequestParts<AppState> for AllowedPass {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let ClientAddress(client) = ClientAddress::from_request_parts(parts, state).await?;
        let presented = crate::auth::bearer(&parts.headers).unwrap_or_default();
        let unsealed = state.clients.seal.vouches_for(presented) == Some(false);
        if unsealed {
            state.limits.unsealed(client)?;
        }
        let admitted = crate::extract::Admitted::from_request_parts(parts, state)
            .await
            .map_err(|refused| {
                let charged = if unsealed {
                    state.limits.unsealed_failed(client)
                } else {
                    state.limits.address(client)
                };
                charged.err().unwrap_or(refused)
            })?;
        state.limits.pass(&admitted.claims)?;
        admitted
            .presented_by_its_buyer(state, &parts.headers)
            .await?;
        Ok(AllowedPass(admitted))
    }
}

/// The client's address, let through its allowance of reads: the first check of reading a
/// reservation or a buyer's list. The page follows a held reservation every 1.5 s, so reads have
/// an allowance of their own, far above the writes', for a carrier's address with many holds.
pub struct AllowedRead;

impl FromRequestParts<AppState> for AllowedRead {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let ClientAddress(client) = ClientAddress::from_request_parts(parts, state).await?;
        state.limits.read(client).map(|()| AllowedRead)
    }
}
