//! The contracts of Floodgate: everything that crosses a process boundary is defined here and
//! nowhere else, so the gateway, the booking service, the consumer and the tests cannot drift apart.
//!
//! # Layout
//! - [`api`]: the public HTTP bodies (reservations, payments, the room's figures and draw), the
//!   JSON error body of every endpoint and every error code.
//! - [`identity`]: buyer identity from the operator's sign-in (JWT/JWKS), and the buyer id.
//! - [`batch`]: natural batching (callers gather while a batch is in flight), for `WAIT` and joins.
//! - [`challenge`]: the bot check at the door (the verifier interface, the built-in proof of work).
//! - [`ids`]: validation of sale and pool identifiers (they end up inside Redis keys and URLs).
//! - [`keys`]: the Redis key layout and its hash tags (sale-wide slot, per-pool slot).
//! - [`lottery`]: the verifiable pre-queue draw (keyed Feistel permutation, commitment).
//! - [`lua`]: how a Lua script is put together from its body and the shared helper files.
//! - [`progress`]: how far the consumer group has applied the topic (PostgreSQL's record).
//! - [`readiness`]: `GET /readyz` of every service (each dependency answers; not draining).
//! - [`redis_conn`]: one connection type for a single Redis and a Redis Cluster.
//! - [`replicas`]: waiting until writes are on a replica (`WAIT`, grouped per slot).
//! - [`reservation`]: a reservation's state in the Redis, API and PostgreSQL vocabularies.
//! - [`resume`]: resume tokens, a client's claim to its ticket across reconnects.
//! - [`token`]: admission token claims, Ed25519 signing with a key id, verification.
//! - [`events`]: the versioned event envelope written to Kafka and its payloads.
//! - [`ws`]: WebSocket messages in both directions and the close codes.
//! - [`runtime`]: process plumbing the binaries share (telemetry, signals, the Redis connection).
//! - [`listener`]: the one way the services serve HTTP (header and body timeouts, a connection
//!   cap), so no stranger holds a socket open for free.
//! - [`kafka`]: every Kafka client's settings, in one order (Floodgate's defaults, then the
//!   operator's `FLOODGATE_KAFKA_*`).
//! - [`primaries`]: which server is each hash slot's primary, watched, so that what a failover may
//!   have lost is written again.
//! - [`telemetry`]: the Prometheus recorder, histograms, and the measurements every service
//!   shares (requests by route, Redis commands and scripts, `process_*`, `floodgate_build_info`).
//! - [`trace`]: one trace across the path, from the booking handler to the consumer's write.
//! - [`openapi`]: what the services' OpenAPI documents share (error responses, serving one).
//! - [`secret_files`]: every secret setting also read from the file `<ENV>_FILE` names.
//! - [`secrets`]: required secrets, constant-time comparison, URLs made safe to print.
//! - [`settings`]: the bounds of a sale's live settings, checked at every entry point.
//! - [`state`]: the Redis state as the services read it (the sale's meta, pool counts, streams).
//!
//! Changing anything here is a protocol change: bump the relevant version
//! ([`events::SCHEMA_VERSION`], [`ws::PROTOCOL_VERSION`]) and keep readers tolerant of the old one.

pub mod api;
pub mod batch;
pub mod challenge;
pub mod events;
pub mod identity;
pub mod ids;
pub mod kafka;
pub mod keys;
pub mod listener;
pub mod lottery;
pub mod lua;
pub mod openapi;
pub mod primaries;
pub mod progress;
pub mod readiness;
pub mod redis_conn;
pub mod replicas;
pub mod reservation;
pub mod resume;
pub mod runtime;
pub mod secret_files;
pub mod secrets;
pub mod settings;
pub mod state;
pub mod telemetry;
pub mod token;
pub mod trace;
pub mod ws;

/// Milliseconds since the Unix epoch, the one time unit used on every wire and in Redis.
pub type UnixMillis = i64;

/// Current wall-clock time in Unix milliseconds.
pub fn now_millis() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
