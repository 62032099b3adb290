//! A rush that is half hostile: what a stranger (admitted or not) can send, and what it may cost
//! everyone else, against the real services.
//!
//! - [`duplicates`]: copies of one request refused for good never answer a 503 the first would
//!   not.
//! - [`edge`]: the shipped edge limits every public location per address.
//! - [`health`]: the health that steers admission counts the backend's work, each pass once.
//! - [`origins`]: another site's page may not open the waiting room or book through its
//!   visitors' browsers.
//! - [`booking`]: the booking service's own limits: per pass (a replay flood), per address, and
//!   the webhook's bad signatures per address (never a valid one).
//! - [`place`]: asking where a place stands: a dead place costs no script, and every address,
//!   place and gateway has an allowance.
//! - [`joins`]: joins and puzzles from an address shared with a stranger: its junk is the
//!   address's to pay for, a person pays with what is their own.
//! - [`lookups`]: asking about sales: one open on the gateway from memory, any other held to
//!   its address's allowance.

mod booking;
mod cached;
mod ceiling;
mod duplicates;
mod edge;
mod edge_sockets;
mod health;
mod joins;
mod lookups;
mod origins;
mod place;
