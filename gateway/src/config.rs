//! Settings of a gateway, from flags or `FLOODGATE_*` environment variables.

use std::path::PathBuf;
use std::time::Duration;

use floodgate_platform::identity::IdentityArgs;
use floodgate_platform::listener::ListenerArgs;
use floodgate_platform::runtime::RedisArgs;
use secrecy::SecretString;

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// Address the waiting room (WebSocket and static files) listens on. Several,
    /// comma-separated, serve the same under one connection cap: an edge in front then opens
    /// its upstream connections to several destinations, each with its own range of source
    /// ports, instead of spending every port it has on one (docs/deploy.md, "The edge's
    /// ports").
    #[arg(
        long,
        env = "FLOODGATE_GATEWAY_LISTEN",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: String,
    /// Address of the admin listener: Prometheus metrics (`/metrics`) and the health probe.
    /// Loopback by default; never route it through the CDN.
    #[arg(
        long,
        env = "FLOODGATE_GATEWAY_ADMIN_LISTEN",
        default_value = "127.0.0.1:9080"
    )]
    pub admin_listen: String,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub identity: IdentityArgs,
    /// The public listener's timeouts and connection cap (platform::listener).
    #[command(flatten)]
    pub listener: ListenerArgs,
    /// Key id of the signing key, written into every admission token's header.
    #[arg(long, env = "FLOODGATE_TOKEN_KEY_ID")]
    pub token_key_id: String,
    /// Ed25519 private seed (base64url, 32 bytes) that admission tokens are signed with.
    /// `floodgate-gateway keygen` makes one.
    #[arg(long, env = "FLOODGATE_TOKEN_SIGNING_KEY", hide_env_values = true)]
    pub token_signing_key: SecretString,
    /// How often each gateway reads the frontier (one Redis round trip per sale per tick) and
    /// the controller admits a batch. 100 ms keeps admission smooth and the push prompt at a
    /// cost of 10 round trips a second per sale per gateway, whatever the number of clients.
    #[arg(
        long = "tick-ms",
        env = "FLOODGATE_TICK_MS",
        default_value = "100",
        value_parser = floodgate_platform::settings::millis
    )]
    pub tick: Duration,
    /// Admission-controller lease length. A dead leader is replaced within this time; it must
    /// be many ticks long so a slow tick never loses the lease.
    #[arg(
        long = "lease-ms",
        env = "FLOODGATE_LEASE_MS",
        default_value = "3000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub lease: Duration,
    /// Most simultaneous anonymous WebSocket sessions from one IP address: sessions to a sale
    /// that asks for no proof of work, of people not signed in. It stops one host from holding
    /// thousands of places in line. A session paid for (a sale's proof of work, a sign-in) does
    /// not count, so a crowd behind one carrier's address is not capped by it on a sale that asks
    /// for either; places coming back may hold twice this (a drain moves them from gateway to
    /// gateway), and every session of an address, paid for or not, is held to 32 times this.
    #[arg(long, env = "FLOODGATE_MAX_CONNECTIONS_PER_IP", default_value_t = 32)]
    pub max_connections_per_ip: u32,
    /// Joins per second charged to one IP address (with a burst of twice that): new places on a
    /// sale that asks for no proof of work by people not signed in, joins whose identity token,
    /// puzzle answer or resume token fails, and joins to a sale this gateway has no room for
    /// yet. A join with a solved puzzle pays with its work; a signed-in buyer's, or a place
    /// coming back, is held to its own allowance instead (three at once, then one a second; four
    /// sessions), so a stranger's junk cannot spend it; places coming back that no buyer signed
    /// in to also count against an allowance of ten times this per address.
    #[arg(long, env = "FLOODGATE_JOINS_PER_SEC_PER_IP", default_value_t = 5)]
    pub joins_per_sec_per_ip: u32,
    /// Who a request is from, as the per-address limits count it (trusted proxies, the IPv6
    /// prefix: platform::clients).
    #[command(flatten)]
    pub clients: floodgate_platform::clients::ClientArgs,
    /// Which pages may open the waiting room from a browser (platform::origins).
    #[command(flatten)]
    pub origins: floodgate_platform::origins::OriginArgs,
    /// Reads of the draw's public record (nonce and batch pages, proofs) this gateway makes
    /// from Redis per second, with bursts of twice that; past it, 503 `draw_busy`. A closed
    /// draw's answers are kept in memory after their first read, so this bounds the record's
    /// work on the sale's primary whoever asks.
    #[arg(long, env = "FLOODGATE_DRAW_READS_PER_SEC", default_value_t = 100)]
    pub draw_reads_per_sec: u32,
    /// Requests for the draw's record allowed per second from one address (bursts of twice
    /// that); past it, 429 `draw_rate_limited`.
    #[arg(
        long,
        env = "FLOODGATE_DRAW_REQUESTS_PER_SEC_PER_IP",
        default_value_t = 5
    )]
    pub draw_requests_per_sec_per_ip: u32,
    /// Asks for a place's standing (`GET /v1/sales/{sale}/place`) without a genuine resume
    /// token allowed per second from one address, in bursts of twice that; past it, 429
    /// `place_rate_limited`. A genuine token is held to its place's allowance alone, so a
    /// stranger's junk cannot spend the people's behind one carrier's address.
    #[arg(
        long,
        env = "FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP",
        default_value_t = 20
    )]
    pub place_requests_per_sec_per_ip: u32,
    /// Reads of a place's standing (a read-only script in the sale's slot) this gateway makes per
    /// second, in bursts of twice that (one address a tenth of it); past it, the answer is the
    /// gateway's memory's, marked `unconfirmed`. A place the gateway already
    /// knows is over (dead, its turn gone, the sale sold out) is answered without one.
    #[arg(long, env = "FLOODGATE_PLACE_READS_PER_SEC", default_value_t = 500)]
    pub place_reads_per_sec: u32,
    /// Places this gateway takes back per second (a resume: a script in the sale's slot each),
    /// in bursts of twice that, one address a tenth of it; past its share an address is refused
    /// 429 `join_rate_limited`, past the budget anyone 503 `resume_busy`. Sized for a drain: a
    /// drained gateway's whole crowd must come back to the others within the grace (30 s), so
    /// at least a gateway's sessions over the grace, twice over (100,000 / 30 s × 2 ≈ 7,000).
    #[arg(long, env = "FLOODGATE_RESUMES_PER_SEC", default_value_t = 10_000)]
    pub resumes_per_sec: u32,
    /// How often one place may be asked about, whoever asks, after three at once; past it, 429
    /// `place_rate_limited`. An app polls every 30 s or so: a place asked about faster is a
    /// script's, and is refused before its read. 0: no allowance per place.
    #[arg(
        long = "place-every-ms",
        env = "FLOODGATE_PLACE_EVERY_MS",
        default_value = "5000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub place_every: Duration,
    /// Asks for the puzzle of a sale this gateway has no room for yet (`GET
    /// /v1/sales/{sale}/challenge`: a made-up sale id reads Redis) allowed per second from one
    /// address, in bursts of twice that; past it, 429 `challenge_rate_limited`. A live sale's
    /// puzzle is the same for everyone for a few seconds, so asking for it again costs a MAC and
    /// is never refused. The same allowance, counted apart, holds asks for the figures or seat
    /// counts of such a sale (`GET /v1/sales/{sale}`, `.../seats.json`; 429
    /// `sale_lookup_rate_limited`).
    #[arg(
        long,
        env = "FLOODGATE_CHALLENGES_PER_SEC_PER_IP",
        default_value_t = 20
    )]
    pub challenges_per_sec_per_ip: u32,
    /// The proof of work rises by itself while a sale's joins (over every gateway) come faster
    /// than this many a second: one bit past it, one more per doubling (0: never).
    #[arg(long, env = "FLOODGATE_POW_RISE_ABOVE", default_value_t = 2_000.0)]
    pub pow_rise_above: f64,
    /// The most bits the proof of work rises to by itself: the most an honest buyer's phone
    /// solves within about two seconds (BENCHMARKS.md, "The proof of work on a phone"). A sale
    /// whose own difficulty is higher keeps its own.
    #[arg(long, env = "FLOODGATE_POW_CEILING", default_value_t = 17)]
    pub pow_ceiling: u8,
    /// How often each waiting client hears from the gateway at least: a protocol-level ping
    /// (browsers answer it by themselves) and its position with a fresh ETA, in one write. The
    /// freshness contract (docs/protocol.md) promises 15 s at most; a longer one is refused. The
    /// sessions take turns by the clock, so the pings are spread over the heartbeat, and each
    /// turn comes a tick and a twentieth of the heartbeat early, for a busy gateway's lateness.
    #[arg(
        long = "heartbeat-ms",
        env = "FLOODGATE_HEARTBEAT_MS",
        default_value = "15000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub heartbeat: Duration,
    /// A session from which nothing (not even a pong) arrives for this long is closed with 4408:
    /// three heartbeats, so one lost pong is not enough to drop someone.
    #[arg(
        long = "idle-timeout-ms",
        env = "FLOODGATE_IDLE_TIMEOUT_MS",
        default_value = "45000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub idle_timeout: Duration,
    /// A send that cannot complete in this time means the client is not reading: it is
    /// disconnected rather than allowed to hold memory.
    #[arg(
        long = "send-timeout-ms",
        env = "FLOODGATE_SEND_TIMEOUT_MS",
        default_value = "10000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub send_timeout: Duration,
    /// How long a client that disconnected keeps its place: reconnecting with its resume token
    /// inside this time (on any gateway) continues where it was; after it, the ticket is dead
    /// and skipped. 30 s covers a network switch or a page reload, and is short enough that the
    /// admission rate is not spent on people who left (other waiting rooms keep them 5-15 min).
    #[arg(
        long = "grace-ms",
        env = "FLOODGATE_GRACE_MS",
        default_value = "30000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub grace: Duration,
    /// A sale's room on this gateway that has had no session for this long stops (its task and
    /// its per-tick Redis reads end, and this gateway's keys leave the sale's slot); the next
    /// join starts it again. A minute rides out a page reload or a reconnect storm.
    #[arg(
        long = "room-idle-ms",
        env = "FLOODGATE_ROOM_IDLE_MS",
        default_value = "60000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub room_idle: Duration,
    #[command(flatten)]
    pub drain: floodgate_platform::service::DrainArgs,
    /// Most WebSocket sessions this gateway holds; past it, joins are shed with 503 and
    /// `Retry-After`. Default: what both limits allow, the open-files limit (raised to its hard
    /// limit at start) less a reserve for Redis connections, logs and the listener, and the
    /// container's memory limit (its cgroup's) at 16 KiB a session beyond 256 MiB.
    #[arg(long, env = "FLOODGATE_MAX_SESSIONS")]
    pub max_sessions: Option<u64>,
    /// The booking service, for the page's booking requests where no CDN routes them to it (the
    /// demo, a single host): the gateway passes `/v1/sales/{sale}/reservations...` on to it, so
    /// the page talks to its own origin only. Unset: those paths are 404 here.
    #[arg(long, env = "FLOODGATE_BOOKING_URL")]
    pub booking_url: Option<String>,
    /// The origins the page may send a payer to for checkout (the payment provider's),
    /// comma-separated (`https://pay.example.com`). A checkout URL elsewhere is not followed.
    #[arg(long, env = "FLOODGATE_CHECKOUT_ORIGINS", value_delimiter = ',')]
    pub checkout_origins: Vec<String>,
    /// Origins the page calls for the sign-in beyond the issuer's own, comma-separated: a
    /// provider whose token endpoint is on another origin than its issuer. The page signs in
    /// with FLOODGATE_IDENTITY_ISSUER as client FLOODGATE_IDENTITY_AUDIENCE (OpenID Connect's
    /// code flow with PKCE); these are added to its Content-Security-Policy's `connect-src`.
    #[arg(long, env = "FLOODGATE_SIGNIN_ORIGINS", value_delimiter = ',')]
    pub signin_origins: Vec<String>,
    /// Folder of the browser client, served at `/` (none: no static files).
    #[arg(long, env = "FLOODGATE_STATIC_DIR")]
    pub static_dir: Option<PathBuf>,
    /// Name of this instance in the controller lease (default: random). Must differ per instance.
    #[arg(long, env = "FLOODGATE_INSTANCE_ID")]
    pub instance_id: Option<String>,
}

impl Config {
    /// Refuses settings the gateway cannot run with, naming the one to fix.
    pub fn check(&self) -> anyhow::Result<()> {
        // The page's old sign-in took an ID token from its URL (login CSRF); a deployment that
        // still sets it is told what replaced it, rather than running without a sign-in.
        anyhow::ensure!(
            std::env::var_os("FLOODGATE_SIGNIN_URL").is_none(),
            "FLOODGATE_SIGNIN_URL is no longer read: the page signs in by OpenID Connect's code \
             flow at FLOODGATE_IDENTITY_ISSUER as client FLOODGATE_IDENTITY_AUDIENCE (register \
             the page's root, https://<site>/, as a redirect URI there); unset it \
             (docs/runbook.md, \"Signing in\")"
        );
        anyhow::ensure!(
            !self.tick.is_zero() && self.lease >= 5 * self.tick,
            "the lease must be at least five ticks long"
        );
        anyhow::ensure!(
            self.heartbeat <= floodgate_protocol::freshness::HEARTBEAT
                && self.heartbeat >= self.tick,
            "FLOODGATE_HEARTBEAT_MS must be from one tick to 15000 (the freshness contract's \
             longest silence)"
        );
        self.clients.check().map_err(anyhow::Error::msg)?;
        anyhow::ensure!(
            floodgate_protocol::settings::POW_DIFFICULTY.contains(&self.pow_ceiling),
            "FLOODGATE_POW_CEILING must be from 1 to 32 bits"
        );
        anyhow::ensure!(
            self.pow_rise_above.is_finite() && self.pow_rise_above >= 0.0,
            "FLOODGATE_POW_RISE_ABOVE must be a number of joins a second, 0 or more"
        );
        Ok(())
    }
}
