//! What a test may change about the services a [`crate::TestApp`] starts.

use crate::oidc;

/// What a test may change about the services it starts.
#[derive(Clone, Debug)]
pub struct TestOptions {
    /// One Redis for everything the app starts and reads (a private server, say); the shared
    /// one by default. The two below, when set, still win for their service.
    pub redis_url: Option<String>,
    /// The booking service's Redis (a fault-injecting proxy, say); the shared one by default.
    pub booking_redis_url: Option<String>,
    /// The gateway's Redis (a fault-injecting proxy, say); the shared one by default.
    pub gateway_redis_url: Option<String>,
    /// The broker for booking and consumer (a private instance, say); the shared one by default.
    pub kafka_brokers: Option<String>,
    pub delivery_timeout_ms: u64,
    pub relay_interval_ms: u64,
    pub reaper_interval_ms: u64,
    pub max_connections_per_ip: u32,
    pub joins_per_sec_per_ip: u32,
    pub heartbeat_ms: u64,
    pub idle_timeout_ms: u64,
    pub grace_ms: u64,
    pub max_sessions: Option<u64>,
    /// How long a gateway's room outlives its last session.
    pub room_idle_ms: u64,
    /// The gateway's static folder (none: no static files).
    pub static_dir: Option<std::path::PathBuf>,
    /// The payment provider origins the page may send a payer to (default: the sandbox's).
    pub checkout_origins: Option<Vec<String>>,
    /// Whether the consumer starts with the app (else [`TestApp::start_consumer`] starts it).
    pub consumer: bool,
    /// Proxies whose `X-Forwarded-For` the gateway believes.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Store buyers as a keyed hash of their subject, with this key (default: the subject).
    pub buyer_id_key: Option<String>,
    /// Run on this Redis Cluster (its seed nodes) whatever the pass.
    pub redis_cluster: Option<Vec<String>>,
    /// The CA file every `rediss://` connection of the app verifies its servers against.
    pub redis_tls_ca_file: Option<std::path::PathBuf>,
    /// The public listeners' header and body timeouts and connection cap (gateway and booking
    /// service; `FLOODGATE_HEADER_TIMEOUT_MS`, `_BODY_TIMEOUT_MS`, `FLOODGATE_MAX_CONNECTIONS`).
    pub header_timeout_ms: u64,
    pub body_timeout_ms: u64,
    pub max_connections: Option<usize>,
    /// A whole request's deadline (`FLOODGATE_REQUEST_TIMEOUT_MS`).
    pub request_timeout_ms: u64,
    /// The gateway's budget of reads of the draw's record, and each address's rate of asking
    /// (`FLOODGATE_DRAW_READS_PER_SEC`, `FLOODGATE_DRAW_REQUESTS_PER_SEC_PER_IP`).
    pub draw_reads_per_sec: u32,
    pub draw_requests_per_sec_per_ip: u32,
    /// What asking where a place stands may cost (`FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP`,
    /// `FLOODGATE_PLACE_READS_PER_SEC`, `FLOODGATE_PLACE_EVERY_MS`), and asking for puzzles
    /// (`FLOODGATE_CHALLENGES_PER_SEC_PER_IP`).
    pub place_requests_per_sec_per_ip: u32,
    pub place_reads_per_sec: u32,
    pub place_every_ms: u64,
    pub challenges_per_sec_per_ip: u32,
    /// Places a gateway takes back a second (`FLOODGATE_RESUMES_PER_SEC`).
    pub resumes_per_sec: u32,
    /// The booking service's limits (`FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP`,
    /// `FLOODGATE_RESERVATIONS_PER_SEC_PER_PASS`, `FLOODGATE_WEBHOOK_FAILURES_PER_SEC_PER_IP`),
    /// and the proxies whose `X-Forwarded-For` it believes.
    pub booking_requests_per_sec_per_ip: u32,
    pub booking_reads_per_sec_per_ip: u32,
    pub reservations_per_sec_per_pass: u32,
    /// `FLOODGATE_HOLDER_REQUESTS_PER_SEC`: a reservation's holder's requests.
    pub holder_requests_per_sec: u32,
    pub webhook_failures_per_sec_per_ip: u32,
    pub booking_trusted_proxies: Vec<std::net::IpAddr>,
    /// How the proof of work rises under a join flood (`FLOODGATE_POW_RISE_ABOVE`,
    /// `FLOODGATE_POW_CEILING`).
    pub pow_rise_above: f64,
    pub pow_ceiling: u8,
    /// The identity issuer the services trust and the page signs in with (default: the
    /// sandbox's sign-in stand-in).
    pub identity_issuer: Option<oidc::IssuerSettings>,
    /// Services that trust no identity issuer at all (no sign-in).
    pub without_sign_in: bool,
    /// The pages allowed to use the gateway and the booking API from a browser
    /// (`FLOODGATE_ALLOWED_ORIGINS`; empty: the services' own origin).
    pub allowed_origins: Vec<String>,
}

impl Default for TestOptions {
    fn default() -> Self {
        Self {
            redis_url: None,
            booking_redis_url: None,
            gateway_redis_url: None,
            kafka_brokers: None,
            delivery_timeout_ms: 10_000,
            relay_interval_ms: 100,
            reaper_interval_ms: 100,
            // Tests open many sockets from 127.0.0.1 at once.
            max_connections_per_ip: 10_000,
            joins_per_sec_per_ip: 100_000,
            heartbeat_ms: 15_000,
            idle_timeout_ms: 45_000,
            grace_ms: 30_000,
            max_sessions: None,
            room_idle_ms: 60_000,
            static_dir: None,
            checkout_origins: None,
            consumer: true,
            trusted_proxies: Vec::new(),
            buyer_id_key: None,
            redis_cluster: None,
            redis_tls_ca_file: None,
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            max_connections: None,
            request_timeout_ms: 30_000,
            // Tests read the draw's record from 127.0.0.1 as often as they like.
            draw_reads_per_sec: 100_000,
            draw_requests_per_sec_per_ip: 100_000,
            // Tests poll places and fetch puzzles from 127.0.0.1 as often as they like too.
            place_requests_per_sec_per_ip: 100_000,
            place_reads_per_sec: 100_000,
            place_every_ms: 0,
            challenges_per_sec_per_ip: 100_000,
            resumes_per_sec: 100_000,
            // Tests retry, replay and race reservations from 127.0.0.1 far faster than people.
            booking_requests_per_sec_per_ip: 100_000,
            booking_reads_per_sec_per_ip: 100_000,
            reservations_per_sec_per_pass: 100_000,
            holder_requests_per_sec: 100_000,
            webhook_failures_per_sec_per_ip: 100_000,
            booking_trusted_proxies: Vec::new(),
            // Tests join in bursts far past any real sale's per-second rate: no rise unless asked.
            pow_rise_above: 0.0,
            pow_ceiling: 17,
            identity_issuer: None,
            without_sign_in: false,
            allowed_origins: Vec::new(),
        }
    }
}

impl TestOptions {
    /// The public listeners' settings (gateway and booking service).
    pub(crate) fn listener_settings(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (
                "FLOODGATE_HEADER_TIMEOUT_MS",
                self.header_timeout_ms.to_string(),
            ),
            (
                "FLOODGATE_BODY_TIMEOUT_MS",
                self.body_timeout_ms.to_string(),
            ),
            (
                "FLOODGATE_REQUEST_TIMEOUT_MS",
                self.request_timeout_ms.to_string(),
            ),
        ];
        if let Some(max) = self.max_connections {
            pairs.push(("FLOODGATE_MAX_CONNECTIONS", max.to_string()));
        }
        if !self.allowed_origins.is_empty() {
            pairs.push(("FLOODGATE_ALLOWED_ORIGINS", self.allowed_origins.join(",")));
        }
        pairs
    }

    /// The gateway's settings a test may change.
    pub(crate) fn gateway_settings(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (
                "FLOODGATE_MAX_CONNECTIONS_PER_IP",
                self.max_connections_per_ip.to_string(),
            ),
            (
                "FLOODGATE_JOINS_PER_SEC_PER_IP",
                self.joins_per_sec_per_ip.to_string(),
            ),
            ("FLOODGATE_HEARTBEAT_MS", self.heartbeat_ms.to_string()),
            (
                "FLOODGATE_IDLE_TIMEOUT_MS",
                self.idle_timeout_ms.to_string(),
            ),
            ("FLOODGATE_GRACE_MS", self.grace_ms.to_string()),
            ("FLOODGATE_ROOM_IDLE_MS", self.room_idle_ms.to_string()),
            (
                "FLOODGATE_DRAW_READS_PER_SEC",
                self.draw_reads_per_sec.to_string(),
            ),
            (
                "FLOODGATE_DRAW_REQUESTS_PER_SEC_PER_IP",
                self.draw_requests_per_sec_per_ip.to_string(),
            ),
            (
                "FLOODGATE_PLACE_REQUESTS_PER_SEC_PER_IP",
                self.place_requests_per_sec_per_ip.to_string(),
            ),
            (
                "FLOODGATE_PLACE_READS_PER_SEC",
                self.place_reads_per_sec.to_string(),
            ),
            ("FLOODGATE_PLACE_EVERY_MS", self.place_every_ms.to_string()),
            (
                "FLOODGATE_CHALLENGES_PER_SEC_PER_IP",
                self.challenges_per_sec_per_ip.to_string(),
            ),
            (
                "FLOODGATE_RESUMES_PER_SEC",
                self.resumes_per_sec.to_string(),
            ),
            ("FLOODGATE_POW_RISE_ABOVE", self.pow_rise_above.to_string()),
            ("FLOODGATE_POW_CEILING", self.pow_ceiling.to_string()),
        ];
        if let Some(max) = self.max_sessions {
            pairs.push(("FLOODGATE_MAX_SESSIONS", max.to_string()));
        }
        if let Some(dir) = &self.static_dir {
            pairs.push(("FLOODGATE_STATIC_DIR", dir.display().to_string()));
        }
        if !self.trusted_proxies.is_empty() {
            let proxies: Vec<String> = self
                .trusted_proxies
                .iter()
                .map(|ip| ipnet::IpNet::from(*ip).to_string())
                .collect();
            pairs.push(("FLOODGATE_TRUSTED_PROXIES", proxies.join(",")));
        }
        pairs
    }
}

impl TestOptions {
    /// The booking service's limits.
    pub(crate) fn booking_limits(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (
                "FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP",
                self.booking_requests_per_sec_per_ip.to_string(),
            ),
            (
                "FLOODGATE_BOOKING_READS_PER_SEC_PER_IP",
                self.booking_reads_per_sec_per_ip.to_string(),
            ),
            (
                "FLOODGATE_RESERVATIONS_PER_SEC_PER_PASS",
                self.reservations_per_sec_per_pass.to_string(),
            ),
            (
                "FLOODGATE_WEBHOOK_FAILURES_PER_SEC_PER_IP",
                self.webhook_failures_per_sec_per_ip.to_string(),
            ),
            (
                "FLOODGATE_HOLDER_REQUESTS_PER_SEC",
                self.holder_requests_per_sec.to_string(),
            ),
        ];
        if !self.booking_trusted_proxies.is_empty() {
            let proxies: Vec<String> = self
                .booking_trusted_proxies
                .iter()
                .map(|ip| ipnet::IpNet::from(*ip).to_string())
                .collect();
            pairs.push(("FLOODGATE_TRUSTED_PROXIES", proxies.join(",")));
        }
        pairs
    }

    /// The defaults, but the booking service reaches Redis at `addr` (a chaos proxy in front of
    /// the shared Redis, say): what a fault in the booking path's Redis does.
    pub fn booking_redis_at(addr: std::net::SocketAddr) -> Self {
        Self {
            booking_redis_url: Some(format!("redis://{addr}")),
            ..Self::default()
        }
    }
}
