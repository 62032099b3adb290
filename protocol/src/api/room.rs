//! The gateway's public bodies (docs/protocol.md 1): a sale's summary, its seat counts and the
//! record of its pre-queue draw, which anyone may check.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::UnixMillis;

/// `GET /v1/sales/{sale}`: the waiting room's public figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct SaleSummary {
    pub sale: String,
    #[schema(value_type = i64)] // Unix milliseconds
    pub opens_at_ms: UnixMillis,
    pub admission_rate: f64,
    pub max_seats: u32,
    pub tickets_issued: u64,
    pub frontier: u64,
    pub paused: bool,
    pub sold_out: bool,
    pub lottery_commitment: String,
    /// The sale's pool ids.
    pub pools: Vec<String>,
    /// Who may join and what they must show: whether a signed-in buyer's identity is required,
    /// the bot check and its difficulty, the per-buyer seat limit.
    pub door: crate::settings::Door,
}

/// `GET /v1/sales/{sale}/place`, with the place's resume token in `Floodgate-Resume`: where a
/// place stands, for an app that cannot hold a socket while it is in the background. Never
/// cached; reading it keeps no place alive (only a session, or the grace after one, does).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PlaceStanding {
    pub ticket: u64,
    pub state: PlaceState,
    /// `waiting`: 1 + the live tickets ahead (as a session would be told).
    pub position: Option<u64>,
    /// `waiting`: the estimated seconds until the turn comes; null while admission is paused.
    pub eta_secs: Option<u64>,
    /// `pre_queue`: how many tickets are in the pre-queue so far.
    pub pre_queue_size: Option<u64>,
    #[schema(value_type = i64)] // Unix milliseconds
    pub opens_at_ms: UnixMillis,
    /// The turn has come and the pass waits: connect with the resume token (within the grace,
    /// before `pass_expires_at_ms`) to receive it.
    pub pass_ready: bool,
    /// `your_turn`: when the pass stops being good, if this gateway knows (Unix ms).
    #[schema(value_type = Option<i64>)]
    pub pass_expires_at_ms: Option<UnixMillis>,
    /// When the place is given up unless a session takes it back (the grace's end, Unix ms);
    /// null while a session holds it.
    #[schema(value_type = Option<i64>)]
    pub kept_until_ms: Option<UnixMillis>,
    /// `true`: the gateway answered from what it holds in memory, without reading the place's
    /// record (it reads as fast as it may, or this address asks for more than its share of its
    /// reads). The state, position and ETA are the room's own view as ever, but
    /// `kept_until_ms` is not known and the place may have lapsed: ask again later for an
    /// answer that is. Absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfirmed: bool,
}

/// Where a place stands.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlaceState {
    /// Before the draw: in the pre-queue.
    PreQueue,
    /// In line.
    Waiting,
    /// Admitted: the pass waits to be collected.
    YourTurn,
    /// Nothing is left to sell.
    SoldOut,
}

/// `GET /v1/sales/{sale}/seats.json`: rough live seat counts, for display only.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct SeatCounts {
    pub sale: String,
    /// When the counts were read (Redis' clock).
    #[schema(value_type = i64)] // Unix milliseconds
    pub at_ms: UnixMillis,
    #[schema(value_type = i64)] // Unix milliseconds
    pub opens_at_ms: UnixMillis,
    pub sold_out: bool,
    pub pools: Vec<PoolSeats>,
}

/// One pool's counts (`null` where the pool's state is missing).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PoolSeats {
    pub pool: String,
    pub capacity: Option<i64>,
    pub available: Option<i64>,
    pub held: Option<i64>,
    pub sold: Option<i64>,
}

/// `GET /v1/sales/{sale}/draw`: the commitment while the pre-queue is open; once it has
/// closed, everything needed to recompute the draw.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DrawRecord {
    PreQueue {
        sale: String,
        #[schema(value_type = i64)] // Unix milliseconds
        opens_at_ms: UnixMillis,
        /// SHA-256 (hex) of the secret seed, published before anyone joined.
        commitment: String,
        prequeue_size_so_far: u64,
    },
    Drawn {
        sale: String,
        #[schema(value_type = i64)] // Unix milliseconds
        opens_at_ms: UnixMillis,
        #[schema(value_type = Option<i64>)] // Unix milliseconds
        closed_at_ms: Option<UnixMillis>,
        /// `floodgate-lottery-v1` (docs/protocol.md 1.6).
        algorithm: String,
        commitment: String,
        /// The revealed secret seed (hex); its SHA-256 is the commitment.
        secret_seed: String,
        prequeue_size: u64,
        prequeue_digest: String,
        draw_seed: String,
        /// The first page of the pre-queue's nonces.
        nonces_url: String,
    },
}

/// `GET /v1/sales/{sale}/draw/nonces`: draw nonces of consecutive pre-queue tickets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct NoncePage {
    pub sale: String,
    /// The ticket of the first nonce.
    pub from: u64,
    pub nonces: Vec<String>,
}

/// `GET /v1/sales/{sale}/draw/batches`: the pre-queue's batches of joins in ticket order.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct BatchPage {
    pub sale: String,
    /// The number of the first batch (from 1).
    pub from: u64,
    pub batches: Vec<PrequeueBatch>,
}

/// One batch of joins, with what a verifier recomputes the pre-queue's chain from.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct PrequeueBatch {
    pub first: u64,
    pub count: u64,
    /// Merkle root (hex) of the batch's nonces.
    pub root: String,
    /// The chain after this batch (hex).
    pub chain: String,
    pub nonces: Vec<String>,
}

/// `GET /v1/sales/{sale}/draw/proof?ticket=N`: what one ticket needs to check, on its own,
/// that the draw counted its nonce.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct DrawProof {
    pub sale: String,
    pub ticket: u64,
    pub nonce: String,
    /// The nonce's index in its batch.
    pub index: usize,
    pub batch: BatchRef,
    /// The RFC 6962 audit path (hex) from the nonce's leaf to the batch's root.
    pub path: Vec<String>,
    pub chain_before: String,
    pub chain_after: String,
}

/// A batch as a proof names it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct BatchRef {
    pub first: u64,
    pub count: u64,
    pub root: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draw_record_says_its_status() {
        let open = DrawRecord::PreQueue {
            sale: "s".into(),
            opens_at_ms: 1,
            commitment: "c".into(),
            prequeue_size_so_far: 2,
        };
        let json = serde_json::to_value(&open).unwrap();
        assert_eq!(json["status"], "pre_queue");
        assert_eq!(json["prequeue_size_so_far"], 2);
        assert_eq!(serde_json::from_value::<DrawRecord>(json).unwrap(), open);
    }
}
