//! Settings of the booking service, from flags or `FLOODGATE_*` environment variables.

use floodgate_contract::runtime::{KafkaArgs, RedisArgs};

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
