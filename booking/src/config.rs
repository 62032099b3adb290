//! Settings of the booking service, from flags or `FLOODGATE_*` environment variables.

use floodgate_contract::events::DEFAULT_RESERVATIONS_TOPIC;

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// Address the booking API listens on.
    #[arg(
        long,
        env = "FLOODGATE_BOOKING_LISTEN",
        default_value = "127.0.0.1:8081"
    )]
    pub listen: String,
    /// Redis holding the inventory and the waiting rooms.
    #[arg(
        long,
        env = "FLOODGATE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// Prefix of every Redis key (several deployments or tests can share one Redis).
    #[arg(long, env = "FLOODGATE_REDIS_PREFIX", default_value = "fg:")]
    pub redis_prefix: String,
    /// Kafka bootstrap servers.
    #[arg(
        long,
        env = "FLOODGATE_KAFKA_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub kafka_brokers: String,
    /// Topic of reservation events.
    #[arg(long, env = "FLOODGATE_RESERVATIONS_TOPIC", default_value = DEFAULT_RESERVATIONS_TOPIC)]
    pub reservations_topic: String,
    /// How long a reservation may wait for the broker's ack before the client gets 503.
    /// Five seconds covers a broker leader change; a client retrying after that still holds a
    /// valid token.
    #[arg(long, env = "FLOODGATE_DELIVERY_TIMEOUT_MS", default_value_t = 5_000)]
    pub delivery_timeout_ms: u64,
    /// Producer `linger.ms`. 0 measured fastest against Tansu for ack-per-request traffic.
    #[arg(long, env = "FLOODGATE_KAFKA_LINGER_MS", default_value_t = 0)]
    pub linger_ms: u32,
    /// Public keys that admission tokens may be signed with: `kid=base64url,...`.
    #[arg(long, env = "FLOODGATE_TOKEN_PUBLIC_KEYS")]
    pub token_public_keys: String,
}
