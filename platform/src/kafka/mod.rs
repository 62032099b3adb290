//! Every Kafka client Floodgate makes (the booking service's producer, the consumer's reader and
//! dead-letter producer, the admin and metadata clients) is configured here, in one order:
//!
//! 1. Floodgate's defaults for the client's role ([`PRODUCER_DEFAULTS`], [`CONSUMER_DEFAULTS`],
//!    [`ADMIN_DEFAULTS`]);
//! 2. the properties file (`FLOODGATE_KAFKA_PROPERTIES_FILE`, `name=value` lines), every client;
//! 3. the first-class settings ([`KafkaArgs`]: brokers, security protocol, SASL, SSL files);
//! 4. any librdkafka property by environment variable: `FLOODGATE_KAFKA_CLIENT_<NAME>` for
//!    every client, `FLOODGATE_KAFKA_PRODUCER_<NAME>` or `FLOODGATE_KAFKA_CONSUMER_<NAME>` for
//!    one role ([`property_name`] says how `<NAME>` becomes a dotted name).
//!
//! Later steps win. A few properties are Floodgate's own because an invariant rests on them
//! (`acks=all` and idempotence: an acknowledged event is never lost or doubled; no Kafka offset
//! commits: offsets live in PostgreSQL with the rows): setting one of those any other way is an
//! error that names why, never silently ignored. An unknown property is librdkafka's error at
//! start-up, naming the property.

mod properties;
mod renewable;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use rdkafka::config::ClientConfig;
use secrecy::{ExposeSecret, SecretString};

use properties::from_env;
pub use properties::{parse_properties, property_name};
pub use renewable::{RenewableProducer, RENEW_AFTER};

/// What a client does, which decides its defaults and which of the role-prefixed variables it
/// reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Producer,
    Consumer,
    /// Topic administration and metadata: only the properties every client takes.
    Admin,
}

/// Floodgate's producer defaults. `acks` and `enable.idempotence` cannot be changed; the rest
/// can, by `FLOODGATE_KAFKA_PRODUCER_<NAME>`.
pub const PRODUCER_DEFAULTS: &[(&str, &str)] = &[
    ("acks", "all"),
    ("enable.idempotence", "true"),
    // Five milliseconds, librdkafka's own default (Floodgate had 0): with 0 the broker thread
    // woke and built a request for nearly every message, 80 us of CPU per 201, a third of the
    // booking process's; with 5 ms it costs 17 us at 50 reservations in flight, and the rate is
    // no lower, the CPU saved outweighing the wait (a 201 waits at most 5 ms more).
    // BENCHMARKS.md, "The producer's linger".
    ("linger.ms", "5"),
    // Events are small JSON documents: lz4 costs least CPU on the hot path and still shrinks a
    // batch of them several times over on the wire and on the brokers' disks.
    ("compression.type", "lz4"),
    // Five minutes, librdkafka's own default, named so that nobody lowers it to a request's
    // wait: a message timing out in the queue makes librdkafka raise the idempotent producer's
    // epoch, which Tansu 0.6's sqlite engine cannot take (it panics and its storage dies; see
    // docs/runbook.md, "The broker's storage died"). A request waits for its acknowledgement by
    // its own timeout instead, and a message that reaches the broker after its request gave up
    // is harmless (the consumer absorbs a repeat).
    ("message.timeout.ms", "300000"),
    // A topic is made by `topics ensure` (the floodgate-setup Job), with the partitions,
    // replicas and `min.insync.replicas` the settings promise, never by a broker that makes any
    // topic it is asked about (`auto.create.topics.enable`, Apache Kafka's default) with its
    // own defaults (one replica): librdkafka's producer asks for that unless told not to, and
    // the booking service asks about its probe topic until it exists.
    ("allow.auto.create.topics", "false"),
];

/// Floodgate's defaults for the admin and metadata clients: as the producer's, no topic made
/// by asking about it (`topics ensure` looks a topic up before it makes it as the settings say).
pub const ADMIN_DEFAULTS: &[(&str, &str)] = &[("allow.auto.create.topics", "false")];

/// Floodgate's consumer defaults. The two offset settings cannot be changed.
pub const CONSUMER_DEFAULTS: &[(&str, &str)] = &[
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    // Small fetches go out at once: with Nagle's algorithm each fetch waited for the previous
    // one's delayed ACK, about 40 ms a batch (BENCHMARKS.md).
    ("socket.nagle.disable", "true"),
    // A stored offset below the log's start (retention passed it): read from the start.
    ("auto.offset.reset", "earliest"),
    // librdkafka's consumer default, named: the consumer asks about its topic every round, and
    // a topic is made by `topics ensure` alone (see the producer's).
    ("allow.auto.create.topics", "false"),
];

/// Properties only Floodgate sets, with why (the error an operator sees).
const OWNED: &[(&str, &str)] = &[
    ("bootstrap.servers", "set FLOODGATE_KAFKA_BROKERS"),
    (
        "acks",
        "Floodgate promises nothing before every in-sync replica has an event",
    ),
    (
        "enable.idempotence",
        "a retried send must never write an event twice",
    ),
    (
        "enable.auto.commit",
        "offsets are stored in PostgreSQL with the rows they cover",
    ),
    (
        "enable.auto.offset.store",
        "offsets are stored in PostgreSQL with the rows they cover",
    ),
    ("group.id", "set FLOODGATE_CONSUMER_GROUP"),
    (
        "sasl.password",
        "set FLOODGATE_KAFKA_SASL_PASSWORD (or its _FILE)",
    ),
    (
        "ssl.key.password",
        "set FLOODGATE_KAFKA_SSL_KEY_PASSWORD (or its _FILE)",
    ),
];

/// The consumer group that writes the bookings, unless `FLOODGATE_CONSUMER_GROUP` says otherwise:
/// the consumer joins it, and the booking commands that wait for the Kafka tail read its progress.
pub const DEFAULT_CONSUMER_GROUP: &str = "floodgate-consumer";

/// Where Kafka is, how to reach it securely, and which topic carries reservation events.
#[derive(Clone, Debug, clap::Args)]
pub struct KafkaArgs {
    /// Kafka bootstrap servers.
    #[arg(
        long,
        env = "FLOODGATE_KAFKA_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub kafka_brokers: String,
    /// Topic of reservation events.
    #[arg(long, env = "FLOODGATE_RESERVATIONS_TOPIC", default_value = floodgate_protocol::events::DEFAULT_RESERVATIONS_TOPIC)]
    pub reservations_topic: String,
    /// How clients reach the brokers (librdkafka's `security.protocol`): plaintext, ssl,
    /// sasl_plaintext or sasl_ssl. Default: plaintext, which belongs on loopback only.
    #[arg(long, env = "FLOODGATE_KAFKA_SECURITY_PROTOCOL", value_parser = ["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"])]
    pub kafka_security_protocol: Option<String>,
    /// The SASL mechanism when the protocol is sasl_*: SCRAM-SHA-512 (the default),
    /// SCRAM-SHA-256 or PLAIN (PLAIN only over sasl_ssl: it sends the password itself).
    #[arg(long, env = "FLOODGATE_KAFKA_SASL_MECHANISM", value_parser = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])]
    pub kafka_sasl_mechanism: Option<String>,
    /// The SASL user name.
    #[arg(long, env = "FLOODGATE_KAFKA_SASL_USERNAME")]
    pub kafka_sasl_username: Option<String>,
    /// The SASL password.
    #[arg(long, env = "FLOODGATE_KAFKA_SASL_PASSWORD", hide_env_values = true)]
    pub kafka_sasl_password: Option<SecretString>,
    /// A PEM file of the CA certificates the brokers' certificates must chain to (default: the
    /// system's store).
    #[arg(long, env = "FLOODGATE_KAFKA_SSL_CA_LOCATION")]
    pub kafka_ssl_ca_location: Option<PathBuf>,
    /// This client's certificate (PEM), for brokers that require one (mutual TLS).
    #[arg(long, env = "FLOODGATE_KAFKA_SSL_CERTIFICATE_LOCATION")]
    pub kafka_ssl_certificate_location: Option<PathBuf>,
    /// This client's private key (PEM), with the certificate above.
    #[arg(long, env = "FLOODGATE_KAFKA_SSL_KEY_LOCATION")]
    pub kafka_ssl_key_location: Option<PathBuf>,
    /// The password of that key, if it is encrypted.
    #[arg(long, env = "FLOODGATE_KAFKA_SSL_KEY_PASSWORD", hide_env_values = true)]
    pub kafka_ssl_key_password: Option<SecretString>,
    /// A file of librdkafka properties for every client, one `name=value` a line (`#` starts a
    /// comment), as Kafka's own tools take them. See "Kafka client properties" under --help.
    #[arg(long, env = "FLOODGATE_KAFKA_PROPERTIES_FILE")]
    pub kafka_properties_file: Option<PathBuf>,
}

/// A client configuration that could not be put together.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

impl KafkaArgs {
    /// The dead-letter topic: `explicit` if set, else the reservations topic with `.dlq`.
    pub fn dead_letter_topic(&self, explicit: Option<&str>) -> String {
        explicit.map_or_else(|| format!("{}.dlq", self.reservations_topic), str::to_owned)
    }

    /// Plaintext settings for `brokers` and `topic` (the tests and tools on loopback).
    pub fn plaintext(brokers: &str, topic: &str) -> Self {
        Self {
            kafka_brokers: brokers.to_owned(),
            reservations_topic: topic.to_owned(),
            kafka_security_protocol: None,
            kafka_sasl_mechanism: None,
            kafka_sasl_username: None,
            kafka_sasl_password: None,
            kafka_ssl_ca_location: None,
            kafka_ssl_certificate_location: None,
            kafka_ssl_key_location: None,
            kafka_ssl_key_password: None,
            kafka_properties_file: None,
        }
    }

    /// The configuration of a client in `role`, with `own` set last: properties the caller
    /// derives from its own settings (a consumer's `group.id`, a producer's delivery timeout),
    /// which nothing else may set either. Reads the process's environment for the
    /// pass-through variables.
    pub fn client(&self, role: Role, own: &[(&str, String)]) -> Result<ClientConfig, ConfigError> {
        self.client_with_env(role, own, std::env::vars_os())
    }

    fn client_with_env(
        &self,
        role: Role,
        own: &[(&str, String)],
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<ClientConfig, ConfigError> {
        let mut props: BTreeMap<String, String> = defaults(role)
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut given = Vec::new();
        if let Some(path) = &self.kafka_properties_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ConfigError(format!(
                    "FLOODGATE_KAFKA_PROPERTIES_FILE: cannot read {}: {e}",
                    path.display()
                ))
            })?;
            given.extend(parse_properties(&text).map_err(|e| {
                ConfigError(format!(
                    "FLOODGATE_KAFKA_PROPERTIES_FILE {}: {e}",
                    path.display()
                ))
            })?);
        }
        given.extend(self.first_class());
        given.extend(from_env(env, role)?);
        for (name, value) in given {
            if let Some(why) = owned(&name, own) {
                return Err(ConfigError(format!(
                    "the Kafka property {name} is set by Floodgate and cannot be changed: {why}"
                )));
            }
            props.insert(name, value);
        }
        props.insert("bootstrap.servers".into(), self.kafka_brokers.clone());
        for (name, value) in own {
            props.insert((*name).to_owned(), value.clone());
        }
        self.secrets_into(&mut props);
        let mut config = ClientConfig::new();
        for (name, value) in props {
            config.set(name, value);
        }
        Ok(config)
    }

    /// The first-class settings that were given, as librdkafka properties (secrets apart).
    fn first_class(&self) -> Vec<(String, String)> {
        let mut props = Vec::new();
        let mut put = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                props.push((name.to_owned(), value));
            }
        };
        put("security.protocol", self.kafka_security_protocol.clone());
        let sasl = self
            .kafka_security_protocol
            .as_deref()
            .is_some_and(|p| p.starts_with("sasl"));
        let mechanism = self.kafka_sasl_mechanism.clone();
        put(
            "sasl.mechanism",
            mechanism.or_else(|| sasl.then(|| "SCRAM-SHA-512".to_owned())),
        );
        put("sasl.username", self.kafka_sasl_username.clone());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        put("ssl.ca.location", path(&self.kafka_ssl_ca_location));
        put(
            "ssl.certificate.location",
            path(&self.kafka_ssl_certificate_location),
        );
        put("ssl.key.location", path(&self.kafka_ssl_key_location));
        props
    }

    fn secrets_into(&self, props: &mut BTreeMap<String, String>) {
        if let Some(password) = &self.kafka_sasl_password {
            props.insert("sasl.password".into(), password.expose_secret().to_owned());
        }
        if let Some(password) = &self.kafka_ssl_key_password {
            props.insert(
                "ssl.key.password".into(),
                password.expose_secret().to_owned(),
            );
        }
    }
}

fn defaults(role: Role) -> &'static [(&'static str, &'static str)] {
    match role {
        Role::Producer => PRODUCER_DEFAULTS,
        Role::Consumer => CONSUMER_DEFAULTS,
        Role::Admin => ADMIN_DEFAULTS,
    }
}

/// Why `name` may not be set from outside, if it may not.
fn owned(name: &str, own: &[(&str, String)]) -> Option<String> {
    if let Some((_, why)) = OWNED.iter().find(|(n, _)| *n == name) {
        return Some((*why).to_owned());
    }
    own.iter()
        .any(|(n, _)| *n == name)
        .then(|| "this service derives it from its own settings (see --help)".to_owned())
}

/// The section `--help` ends with in every binary that talks to Kafka: how properties pass
/// through, and Floodgate's defaults, from the same lists the code applies.
pub fn help() -> String {
    let list = |defaults: &[(&str, &str)]| {
        defaults
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "Kafka client properties:\n  Any librdkafka property passes through the environment: \
         FLOODGATE_KAFKA_CLIENT_<NAME> (every client),\n  FLOODGATE_KAFKA_PRODUCER_<NAME> or \
         FLOODGATE_KAFKA_CONSUMER_<NAME> (one role); <NAME> is the property upper-cased\n  with \
         `.` as `_` and `_` as `__` (FLOODGATE_KAFKA_PRODUCER_LINGER_MS=5 sets linger.ms=5).\n  \
         Order: defaults, FLOODGATE_KAFKA_PROPERTIES_FILE, the settings above, the variables.\n  \
         Producer defaults: {}\n  Consumer defaults: {}\n  Admin defaults: {}\n  Fixed by \
         Floodgate: {}\n",
        list(PRODUCER_DEFAULTS),
        list(CONSUMER_DEFAULTS),
        list(ADMIN_DEFAULTS),
        OWNED.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
    )
}

#[cfg(test)]
mod tests;
