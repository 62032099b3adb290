//! Settings of the booking service, from flags or `FLOODGATE_*` environment variables.

use std::time::Duration;

use floodgate_platform::runtime::{DatabaseArgs, KafkaArgs, RedisArgs};
use secrecy::SecretString;

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// Address the booking API listens on.
    #[arg(
        long,
        env = "FLOODGATE_BOOKING_LISTEN",
        default_value = "127.0.0.1:8081"
    )]
    pub listen: String,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub identity: floodgate_platform::identity::IdentityArgs,
    /// The public listener's timeouts and connection cap (platform::listener).
    #[command(flatten)]
    pub listener: floodgate_platform::listener::ListenerArgs,
    /// Which pages may book from a browser (platform::origins).
    #[command(flatten)]
    pub origins: floodgate_platform::origins::OriginArgs,
    /// Who a request is from, as the per-address limits count it (platform::clients).
    #[command(flatten)]
    pub clients: floodgate_platform::clients::ClientArgs,
    /// Writes to the booking API allowed per second from one address, in bursts of twice that:
    /// starting a payment, and reservations whose pass does not check (one that checks is held
    /// to its pass's allowance alone); past it, 429 `booking_rate_limited`. Only admitted people
    /// book, a handful of requests each: 50 a second serves hundreds of people behind one
    /// carrier's address.
    #[arg(
        long,
        env = "FLOODGATE_BOOKING_REQUESTS_PER_SEC_PER_IP",
        default_value_t = 50
    )]
    pub requests_per_sec_per_ip: u32,
    /// Reads of the booking API (a reservation by its secret, a buyer's list) allowed per second
    /// from one address, in bursts of twice that; past it, 429 `booking_rate_limited`. The page
    /// follows a held reservation every 1.5 s: 1,000 a second serves 1,500 holds behind one
    /// carrier's address.
    #[arg(
        long,
        env = "FLOODGATE_BOOKING_READS_PER_SEC_PER_IP",
        default_value_t = 1_000
    )]
    pub reads_per_sec_per_ip: u32,
    /// Reservation attempts allowed per second with one pass (admission token), in bursts of
    /// twice that; past it, 429 `reservation_rate_limited`. A person makes one, retries a 503
    /// after a second, or tries another class after a sell-out.
    #[arg(
        long,
        env = "FLOODGATE_RESERVATIONS_PER_SEC_PER_PASS",
        default_value_t = 2
    )]
    pub reservations_per_sec_per_pass: u32,
    /// Requests allowed per second by a reservation's holder (its secret proven by
    /// FLOODGATE_RESERVATION_KEY), reading it and starting its payment together, in bursts of
    /// twice that; past it, 429 `holder_rate_limited`. The page reads a hold every 1.5 s and a
    /// person pays once or twice. A signed-in buyer's list of their reservations in a sale is
    /// held to as many (each is a query of PostgreSQL).
    #[arg(long, env = "FLOODGATE_HOLDER_REQUESTS_PER_SEC", default_value_t = 4)]
    pub holder_requests_per_sec: u32,
    /// Webhook deliveries whose signature fails allowed per second from one address, in bursts
    /// of twice that; past it such a delivery is answered 429 `webhook_rate_limited`. A delivery
    /// with a valid signature is never refused for its rate.
    #[arg(
        long,
        env = "FLOODGATE_WEBHOOK_FAILURES_PER_SEC_PER_IP",
        default_value_t = 5
    )]
    pub webhook_failures_per_sec_per_ip: u32,
    /// How long a reservation may wait for the broker's ack before its hold is taken back and
    /// the client gets 503. Five seconds covers a broker leader change; a client retrying after
    /// that still holds a valid token.
    #[arg(
        long = "delivery-timeout-ms",
        env = "FLOODGATE_DELIVERY_TIMEOUT_MS",
        default_value = "5000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub delivery_timeout: Duration,
    /// Where a broker known to be down is probed (`topics ensure` makes it; default: the
    /// reservations topic's name with `.probe`).
    #[arg(long, env = "FLOODGATE_PROBE_TOPIC")]
    pub probe_topic: Option<String>,
    /// Public keys that admission tokens may be signed with: `kid=base64url,...`.
    #[arg(long, env = "FLOODGATE_TOKEN_PUBLIC_KEYS")]
    pub token_public_keys: String,
    /// The payment provider's API, over HTTPS. Required, unless `--payment-sandbox` asks for the
    /// sandbox provider by name (then it defaults to the local sandbox, http://127.0.0.1:8082).
    #[arg(long, env = "FLOODGATE_PAYMENT_PROVIDER_URL")]
    pub payment_provider_url: Option<String>,
    /// A PEM file of CA certificates to trust for the payment provider's HTTPS, besides the
    /// system's (a provider reached through a private gateway with its own CA, say).
    #[arg(long, env = "FLOODGATE_PAYMENT_CA_FILE")]
    pub payment_ca_file: Option<std::path::PathBuf>,
    /// Use the sandbox provider (`floodgate-sandbox`): no money moves. For demos and
    /// tests only; the service says so loudly in its log.
    #[arg(long, env = "FLOODGATE_PAYMENT_SANDBOX")]
    pub payment_sandbox: bool,
    /// The key this service presents to the payment provider's API (`Authorization: Bearer`).
    /// Required, at least 32 characters.
    #[arg(long, env = "FLOODGATE_PAYMENT_API_KEY", hide_env_values = true)]
    pub payment_api_key: Option<SecretString>,
    /// Shared secret the provider signs its webhooks with (HMAC-SHA256). Required, at least 32
    /// characters.
    #[arg(long, env = "FLOODGATE_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: SecretString,
    /// The key each reservation's secret is made with (HMAC-SHA256 of its sale and id; at least
    /// 32 characters), the same on every booking service. A presented secret is then checked
    /// in memory first: a holder's requests are held to their reservation's allowance and
    /// junk to its address's. Rotate by moving the old key to
    /// FLOODGATE_RESERVATION_PREVIOUS_KEYS (docs/runbook.md).
    #[arg(long, env = "FLOODGATE_RESERVATION_KEY", hide_env_values = true)]
    pub reservation_key: SecretString,
    /// The reservation keys FLOODGATE_RESERVATION_KEY replaced, comma-separated: secrets they
    /// made are still proven. Keep each until every sale with reservations made under it has
    /// ended: a secret no listed key proves is answered 404 without Redis work.
    #[arg(
        long,
        env = "FLOODGATE_RESERVATION_PREVIOUS_KEYS",
        hide_env_values = true
    )]
    pub reservation_previous_keys: Option<SecretString>,
    /// How far a webhook's signed timestamp may be from now, in seconds. Five minutes, as the
    /// large providers use: enough for clock skew and a retry queue, too short to replay a
    /// captured delivery much later.
    #[arg(
        long = "webhook-tolerance-secs",
        env = "FLOODGATE_WEBHOOK_TOLERANCE_SECS",
        default_value = "300",
        value_parser = floodgate_platform::settings::secs
    )]
    pub webhook_tolerance: Duration,
    /// How often the relay looks for outbox events that no request published.
    #[arg(
        long = "relay-interval-ms",
        env = "FLOODGATE_RELAY_INTERVAL_MS",
        default_value = "200",
        value_parser = floodgate_platform::settings::millis
    )]
    pub relay_interval: Duration,
    /// How often the reaper looks for lapsed holds.
    #[arg(
        long = "reaper-interval-ms",
        env = "FLOODGATE_REAPER_INTERVAL_MS",
        default_value = "500",
        value_parser = floodgate_platform::settings::millis
    )]
    pub reaper_interval: Duration,
    /// How often every armed sale is reconciled (Redis against PostgreSQL, read only), for the
    /// `floodgate_reconcile_drift_pools` metric and its alert; 0 turns it off.
    #[arg(
        long = "reconcile-interval-ms",
        env = "FLOODGATE_RECONCILE_INTERVAL_MS",
        default_value = "60000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub reconcile_interval: Duration,
    #[command(flatten)]
    pub drain: floodgate_platform::service::DrainArgs,
    /// Address of the ops API (its own listener, never exposed through the CDN).
    #[arg(long, env = "FLOODGATE_ADMIN_LISTEN", default_value = "127.0.0.1:9081")]
    pub admin_listen: String,
    /// Bearer token of the ops API (served on the admin listener). Required, at least 32
    /// characters. Several, separated by commas, are all accepted: rotate by adding the new
    /// one, moving every operator and script to it, then removing the old one.
    #[arg(long, env = "FLOODGATE_OPS_TOKEN", hide_env_values = true)]
    pub ops_token: SecretString,
    /// The key the audit trail's rows are chained with (HMAC-SHA256; at least 32 characters).
    /// Kept outside PostgreSQL, the same on every booking service and admin command: whoever
    /// can write to the database without it cannot edit or delete a row unseen
    /// (`floodgate-booking audit verify`).
    #[arg(long, env = "FLOODGATE_AUDIT_KEY", hide_env_values = true)]
    pub audit_key: SecretString,
    /// The audit keys FLOODGATE_AUDIT_KEY replaces, comma-separated: until `floodgate-booking
    /// audit rotate` hands the chain over, rows are still made with the key in force, so a
    /// rollout of a new key first gives every service both (docs/runbook.md, "The audit
    /// trail"). A service without the key in force refuses ops changes (503).
    #[arg(long, env = "FLOODGATE_AUDIT_PREVIOUS_KEYS", hide_env_values = true)]
    pub audit_previous_keys: Option<SecretString>,
    /// How many Redis replicas must have a reservation's and a payment's writes before anything
    /// is promised on them (the 201, a webhook's 2xx, a relayed event). Default: 0 on a single
    /// Redis, 1 on a Redis Cluster. 0 trades that guarantee away: a primary lost in a failover
    /// can then take answered bookings with it.
    #[arg(long, env = "FLOODGATE_REDIS_MIN_REPLICAS")]
    pub redis_min_replicas: Option<u32>,
    /// How long a write may wait for those replicas (capped at 1,500 ms, under the Redis
    /// client's response timeout) before the request is answered 503 and the hold taken back.
    #[arg(
        long = "redis-replica-timeout-ms",
        env = "FLOODGATE_REDIS_REPLICA_TIMEOUT_MS",
        default_value = "500",
        value_parser = floodgate_platform::settings::millis
    )]
    pub redis_replica_timeout: Duration,
    /// Name of this instance in the relay leases (default: random). Must differ per instance.
    #[arg(long, env = "FLOODGATE_INSTANCE_ID")]
    pub instance_id: Option<String>,
}

/// Where payments go, once the settings are checked.
#[derive(Clone, Debug)]
pub struct PaymentProvider {
    pub url: String,
    pub api_key: SecretString,
    pub sandbox: bool,
    /// Extra CA certificates for the provider's HTTPS.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Config {
    /// Checks every secret and the payment provider's settings; the service refuses to start
    /// on any error, which names the setting to fix.
    pub fn validate(&self) -> Result<PaymentProvider, String> {
        use floodgate_platform::secrets::check_secret;
        self.clients.check()?;
        floodgate_platform::secrets::named_secret_list("FLOODGATE_OPS_TOKEN", &self.ops_token)?;
        crate::audit::AuditKeys::parse(&self.audit_key, self.audit_previous_keys.as_ref())?;
        check_secret("FLOODGATE_WEBHOOK_SECRET", &self.webhook_secret)?;
        crate::holders::ReservationKey::parse(
            &self.reservation_key,
            self.reservation_previous_keys.as_ref(),
        )?;
        let api_key = self.payment_api_key.clone().ok_or_else(|| {
            "FLOODGATE_PAYMENT_API_KEY is required: the key of the payment provider's API"
                .to_owned()
        })?;
        check_secret("FLOODGATE_PAYMENT_API_KEY", &api_key)?;
        let url = match (&self.payment_provider_url, self.payment_sandbox) {
            (Some(url), false) if url.starts_with("https://") => url.clone(),
            (Some(url), false) => {
                return Err(format!(
                    "FLOODGATE_PAYMENT_PROVIDER_URL must be an https:// URL (got {}); a plain-HTTP provider is only the sandbox, with FLOODGATE_PAYMENT_SANDBOX=true",
                    floodgate_platform::secrets::redact_url(url)
                ))
            }
            (None, false) => {
                return Err("FLOODGATE_PAYMENT_PROVIDER_URL is required (a real provider's https:// API); for the sandbox provider set FLOODGATE_PAYMENT_SANDBOX=true".into())
            }
            // The sandbox speaks plain http; an https URL beside the switch is a real provider,
            // and one of the two settings is a mistake that would send money to the wrong one.
            (Some(url), true) if url.trim().to_ascii_lowercase().starts_with("https://") => {
                return Err(format!(
                    "FLOODGATE_PAYMENT_SANDBOX=true beside a real provider's URL ({}): the sandbox is only for test mode; unset FLOODGATE_PAYMENT_SANDBOX to use the provider, or point FLOODGATE_PAYMENT_PROVIDER_URL at the sandbox (http://)",
                    floodgate_platform::secrets::redact_url(url)
                ))
            }
            (url, true) => url.clone().unwrap_or_else(|| "http://127.0.0.1:8082".into()),
        };
        Ok(PaymentProvider {
            url,
            api_key,
            sandbox: self.payment_sandbox,
            ca_file: self.payment_ca_file.clone(),
        })
    }

    /// The replicas every promised write waits for (see `redis_min_replicas`).
    pub fn min_replicas(&self, cluster: bool) -> u32 {
        self.redis_min_replicas.unwrap_or(u32::from(cluster))
    }

    /// The relay leaves an outbox entry alone this long, so it never races a request still
    /// waiting for that same event's ack (which is bounded by the delivery timeout).
    pub fn relay_grace(&self) -> Duration {
        self.delivery_timeout + Duration::from_secs(1)
    }
}
