//! Settings of a consumer, from flags or `FLOODGATE_*` environment variables.

use std::time::Duration;

use floodgate_platform::runtime::{DatabaseArgs, KafkaArgs};

#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Where Prometheus scrapes this consumer's metrics (`GET /metrics`), and where probes find
    /// `GET /healthz` and `GET /readyz`.
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_METRICS_LISTEN",
        default_value = "127.0.0.1:9102"
    )]
    pub metrics_listen: String,
    /// How long a stopping consumer stays up, unready (`/readyz` 503 `draining`) and still
    /// applying events, before it finishes its batch, gives its partitions back and exits.
    /// Nothing routes work to a consumer, so none is needed by default; its own name, so the
    /// gateways' and booking instances' `FLOODGATE_DRAIN_DELAY_MS` beside it (one ConfigMap)
    /// does not hold it up.
    #[arg(
        long = "drain-delay-ms",
        env = "FLOODGATE_CONSUMER_DRAIN_DELAY_MS",
        default_value = "0",
        value_parser = floodgate_platform::settings::millis
    )]
    pub drain_delay: Duration,
    /// Consumer group; instances in one group share the topic's partitions (the group is kept in
    /// PostgreSQL: `membership`).
    #[arg(
        long,
        env = "FLOODGATE_CONSUMER_GROUP",
        default_value = floodgate_platform::kafka::DEFAULT_CONSUMER_GROUP
    )]
    pub group: String,
    /// This instance's id in the group, stable across restarts and unique per instance (no
    /// `/`). A restarted instance takes its partitions straight back instead of waiting for its
    /// earlier run's leases to lapse. Without one, each start is a new member.
    #[arg(long, env = "FLOODGATE_CONSUMER_INSTANCE_ID", value_parser = instance_id)]
    pub instance_id: Option<String>,
    /// Where events that can never be applied go, with the reason in a header (default: the
    /// reservations topic's name with `.dlq`).
    #[arg(long, env = "FLOODGATE_DLQ_TOPIC")]
    pub dlq_topic: Option<String>,
    /// Most events applied in one database transaction.
    #[arg(long, env = "FLOODGATE_CONSUMER_BATCH", default_value_t = 500)]
    pub batch_max: usize,
    /// How long a batch waits for more events once it has one: a few milliseconds buy large
    /// batches under load and cost nothing when idle.
    #[arg(
        long = "batch-linger-ms",
        env = "FLOODGATE_CONSUMER_LINGER_MS",
        default_value = "10",
        value_parser = floodgate_platform::settings::millis
    )]
    pub batch_linger: Duration,
    /// How long the group waits for a member it has not heard from before it gives the
    /// member's partitions to the others. A killed instance's partitions wait this long (a
    /// stopped one gives them back at once); a few seconds suit a test.
    #[arg(
        long = "session-timeout-ms",
        env = "FLOODGATE_CONSUMER_SESSION_TIMEOUT_MS",
        default_value = "45000",
        value_parser = floodgate_platform::settings::millis
    )]
    pub session_timeout: Duration,
}

fn instance_id(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > 128 || text.contains('/') {
        return Err("an instance id is 1 to 128 characters, without '/'".into());
    }
    Ok(text.to_owned())
}

impl Config {
    pub fn dlq_topic(&self) -> String {
        self.kafka.dead_letter_topic(self.dlq_topic.as_deref())
    }
}
