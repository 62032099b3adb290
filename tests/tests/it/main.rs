//! Floodgate's integration tests: one binary, a module per area, against the real services
//! (Redis, the Kafka-API broker, PostgreSQL, nginx, Chromium) through `floodgate_tests::TestApp`.
//! One binary because each test binary links the whole stack again, which costs minutes of every
//! build on two cores; nextest still runs every test in a process of its own.
//!
//! # Layout
//! - [`walking_skeleton`]: one sale through all five layers.
//! - [`booking_api`], [`reservations`], [`lifecycle_properties`], [`payments`]: the booking API,
//!   contention, the reservation lifecycle's interleavings, payments and webhooks.
//! - [`hostile`]: a rush that is half hostile: what a stranger can send and what it may cost
//!   everyone else (the `Origin` check, ...).
//! - [`rfc6455`]: the waiting room's WebSocket against RFC 6455, case by case, from a client
//!   written from the RFC.
//! - [`waiting_room`], [`fairness`], [`freshness`], [`join_batches`], [`room_fleet`], [`ops`]: the
//!   waiting room, its fairness, the freshness contract, joins sent in batches, several gateways,
//!   the ops API.
//! - [`audit`], [`audit_keys`]: the record of every operator action, and the keys it is chained
//!   with.
//! - [`buyers`]: signed-in buyers (identity, one place each, the pass bound to its buyer, the
//!   per-buyer limit) and the bot check at the door.
//! - [`consumer`], [`consumer_group`], [`outages`], [`rebuild`], [`reconcile`]: durability, the
//!   consumer group growing and shrinking, faults and recovery.
//! - [`secrets`], [`tls`], [`kafka_settings`], [`probes`], [`topics`]: what a deployment sets:
//!   secrets from files and their rotation, TLS to every dependency, any librdkafka setting, the
//!   probes, the topics.
//! - [`script_headers`]: every Lua script's header against its declaration in Rust.
//! - [`settings_reference`]: docs/settings.md, generated from every service's settings.
//! - [`sale_end`]: the end of a sale and the purge of its Redis state.
//! - [`slow_clients`]: what a stranger's silent or trickling connection costs every listener;
//!   [`draw_costs`]: what asking for the draw's public record costs the sale's Redis.
//! - [`cluster`]: a sale on a real Redis Cluster (the named scenarios also run on one, in
//!   `deploy/test.sh`'s cluster pass).
//! - [`catalog`], [`edge`], [`browser`]: sale files, the CDN configuration, the page in Chromium.
//! - [`loadgen`]: the load generator's scenarios; [`benchmarks`]: the benchmarks' own tools;
//!   [`simulate`]: the sale simulator's plan and its pre-scale patch, applied to an overlay.
//! - [`metrics`]: what the services measure, as histograms, accepted by `promtool`;
//!   [`traces`]: one reservation's spans in one trace, from the booking handler to the consumer.
//! - [`error_codes`]: docs/protocol.md's table of error codes, generated from their declarations.
//! - [`openapi`]: the OpenAPI documents, validated and fuzzed against the live APIs;
//!   [`asyncapi`]: the WebSocket's AsyncAPI document, complete and valid; [`clients`]: the
//!   JavaScript client module (in Node, and live against the document) and the Rust client.
//! - [`layout`]: the checks of the code's own shape (`deploy/check-*.sh`); [`crate_graph`]: which
//!   crate may link what; [`deployment`]: the checks of the Dockerfile, the compose file and the
//!   Kubernetes manifests.

// Scenarios read top to bottom as one story; the 80-line limit is for service code.
#![allow(clippy::too_many_lines)]

mod agreement;
mod architecture;
mod asyncapi;
mod audit;
mod audit_keys;
mod autopilot;
mod benchmarks;
mod booking_api;
mod browser;
mod buyers;
mod catalog;
mod chaos_proxy;
mod clients;
mod cluster;
mod consumer;
mod consumer_group;
mod containers;
mod crate_graph;
mod deployment;
mod draw_costs;
mod edge;
mod edge_ports;
mod error_codes;
mod failover;
mod fairness;
mod freshness;
mod hostile;
mod join_batches;
mod kafka_settings;
mod layout;
mod lifecycle_properties;
mod loadgen;
mod lost_writes;
mod manifests;
mod metrics;
mod openapi;
mod ops;
mod outages;
mod outbound;
mod payments;
mod probes;
mod rebuild;
mod reconcile;
mod reservations;
mod rfc6455;
mod room_fleet;
mod sale_end;
mod script_headers;
mod secrets;
mod settings_reference;
mod simulate;
mod slow_clients;
mod tls;
mod topics;
mod traces;
mod waiting_room;
mod walking_skeleton;
