//! Settings of the booking service, from flags or `FLOODGATE_*` environment variables.

use floodgate_contract::runtime::{KafkaArgs, RedisArgs};
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
    pub redis: RedisArgs,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// How long a reservation may wait for the broker's ack before its hold is taken back and
    /// the client gets 503. Five seconds covers a broker leader change; a client retrying after
    /// that still holds a valid token.
    #[arg(long, env = "FLOODGATE_DELIVERY_TIMEOUT_MS", default_value_t = 5_000)]
    pub delivery_timeout_ms: u64,
    /// Producer `linger.ms`. 0 measured fastest against Tansu for ack-per-request traffic.
    #[arg(long, env = "FLOODGATE_KAFKA_LINGER_MS", default_value_t = 0)]
    pub linger_ms: u32,
    /// Public keys that admission tokens may be signed with: `kid=base64url,...`.
    #[arg(long, env = "FLOODGATE_TOKEN_PUBLIC_KEYS")]
    pub token_public_keys: String,
    /// The payment provider's API (the sandbox provider by default).
    #[arg(
        long,
        env = "FLOODGATE_PAYMENT_PROVIDER_URL",
        default_value = "http://127.0.0.1:8082"
    )]
    pub payment_provider_url: String,
    /// Shared secret the provider signs its webhooks with (HMAC-SHA256).
    #[arg(long, env = "FLOODGATE_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: SecretString,
    /// How far a webhook's signed timestamp may be from now, in seconds. Five minutes, as the
    /// large providers use: enough for clock skew and a retry queue, too short to replay a
    /// captured delivery much later.
    #[arg(long, env = "FLOODGATE_WEBHOOK_TOLERANCE_SECS", default_value_t = 300)]
    pub webhook_tolerance_secs: u64,
    /// How often the relay looks for outbox events that no request published.
    #[arg(long, env = "FLOODGATE_RELAY_INTERVAL_MS", default_value_t = 200)]
    pub relay_interval_ms: u64,
    /// How often the reaper looks for lapsed holds.
    #[arg(long, env = "FLOODGATE_REAPER_INTERVAL_MS", default_value_t = 500)]
    pub reaper_interval_ms: u64,
    /// Address of the ops API (its own listener, never exposed through the CDN).
    #[arg(long, env = "FLOODGATE_ADMIN_LISTEN", default_value = "127.0.0.1:9081")]
    pub admin_listen: String,
    /// Bearer token of the ops API. Without one the ops API is not served.
    #[arg(long, env = "FLOODGATE_OPS_TOKEN", hide_env_values = true)]
    pub ops_token: Option<SecretString>,
    /// Name of this instance in the relay leases (default: random). Must differ per instance.
    #[arg(long, env = "FLOODGATE_INSTANCE_ID")]
    pub instance_id: Option<String>,
}

impl Config {
    /// The relay leaves an outbox entry alone this long, so it never races a request still
    /// waiting for that same event's ack (which is bounded by the delivery timeout).
    pub fn relay_grace_ms(&self) -> u64 {
        self.delivery_timeout_ms + 1_000
    }
}
