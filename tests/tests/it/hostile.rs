//! A rush that is half hostile: what a stranger (admitted or not) can send, and what it may cost
//! everyone else, against the real services.
//!
//! - [`origins`]: another site's page may not open the waiting room or book through its
//!   visitors' browsers.
//! - [`place`]: asking where a place stands, and for puzzles: a dead place costs no script, and
//!   every address, place and gateway has an allowance.

mod origins;
mod place;
