//! What Floodgate's services share: the runtime of a process (listeners, signals, telemetry,
//! traces, readiness), the Redis and Kafka clients, the Redis key layout and the state read
//! through it, identity checks, secrets and settings. The wire itself (bodies, codes, events,
//! messages, tokens) is `floodgate-protocol`'s; this crate builds on it and is never a client's
//! dependency.
//!
//! # Layout
//! - [`http`]: the one way every service refuses a request ([`http::ApiError`]: a protocol
//!   `Refusal`, its status from its code, `Retry-After` where a retry is due).
//! - [`identity`]: buyer identity from the operator's sign-in (JWT/JWKS): the check and its settings.
//! - [`service`]: one service process's life, for every `main` and the tests alike: build,
//!   listen (public and admin), serve, drain (unready at once, still serving for its drain
//!   delay), shut down.
//! - [`settings`]: how a service's settings are read: durations (`*_MS`, `*_SECS`) parsed once
//!   into `Duration`s, and settings given by name, as the tests give them.
//! - [`admission`]: how many one admission tick may let in (the line, the cap, the stock), for
//!   the admission leader and the sale simulator alike.
//! - [`autopilot`]: the admission autopilot's controller (a sale's rate moved by the backend's
//!   health), pure, for the admission leader and the sale simulator alike.
//! - [`clients`]: who a request is from, as per-address limits count it (trusted proxies, the
//!   IPv6 prefix), and the in-memory rate per key every limit is made of.
//! - [`cache`]: bodies kept for crowds in three encodings with an ETag each (the gateway's assets
//!   and seat counts, the booking service's catalog documents).
//! - [`batch`]: natural batching (callers gather while a batch is in flight), for `WAIT` and joins.
//! - [`keys`]: the Redis key layout and its hash tags (sale-wide slot, per-pool slot).
//! - [`lua`]: how a Lua script is put together from its body and the shared helper files.
//! - [`script`]: the one typed layer over the Lua scripts: each declared once (its keys, its
//!   arguments, its reply's type), called and written down through its declaration;
//!   [`scripts`]: the scripts both services run.
//! - [`progress`]: how far the consumer group has applied the topic (PostgreSQL's record).
//! - [`readiness`]: `GET /readyz` of every service (each dependency answers; not draining).
//! - [`redis_conn`]: one connection type for a single Redis and a Redis Cluster.
//! - [`replicas`]: waiting until writes are on a replica (`WAIT`, grouped per slot).
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
//! - [`outbound`]: how every HTTP client is made (idle connections dropped before a listener
//!   closes them).
//! - [`origins`]: which web pages may use the waiting room and the booking API from a browser
//!   (the `Origin` check, `FLOODGATE_ALLOWED_ORIGINS`).
//! - [`secret_files`]: every secret setting also read from the file `<ENV>_FILE` names.
//! - [`secrets`]: required secrets, which of several accepted secrets was presented, URLs made
//!   safe to print.
//! - [`state`]: the Redis state as the services read it (the sale's meta, pool counts, streams).
//!
//! The Redis key layout and state are a contract between the services too: changing them is a
//! change of every process that reads them, and of the Lua scripts in `lua/`.

pub mod admission;
pub mod autopilot;
pub mod batch;
pub mod cache;
pub mod clients;
pub mod http;
pub mod identity;
pub mod kafka;
pub mod keys;
pub mod listener;
pub mod lua;
pub mod openapi;
pub mod origins;
pub mod outbound;
pub mod primaries;
pub mod progress;
pub mod readiness;
pub mod redis_conn;
pub mod replicas;
pub mod runtime;
pub mod script;
pub mod scripts;
pub mod secret_files;
pub mod secrets;
pub mod service;
pub mod settings;
pub mod state;
pub mod telemetry;
pub mod trace;
