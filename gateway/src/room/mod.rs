//! A sale's waiting room as one gateway sees it: the shared view every session watches, and the
//! task that refreshes it and, while this instance holds the lease, runs the admission controller.
//!
//! Per tick and per sale this gateway makes one pipelined Redis round trip to read the view,
//! whatever the number of clients; sessions compute their own positions from it. The leader
//! adds a few more (lease, stock and housekeeping reads, bury, advance), never per client.
//!
//! - [`view`]: the view sessions read, and how it is made from the sale's state.
//! - [`board`]: every session's seat, and the wake-ups a tick sends; [`crossings`]: which
//!   places a tick moved past a value of the freshness grid.
//! - [`frames`]: what a waiting client is shown, each message serialised once per tick.
//! - [`driver`]: the room's task, one tick at a time.
//! - `controller`: the leader's tick (stock, sold-out, bury, sweep, the fenced advance);
//!   `pilot`: the admission autopilot it runs once a second while the sale has it on.

pub mod board;
mod controller;
pub mod crossings;
pub mod driver;
pub mod frames;
mod join_rate;
mod pilot;
mod placing;
pub mod view;

use std::sync::{Arc, Mutex, OnceLock, RwLock};

use floodgate_protocol::lottery::Draw;
use floodgate_protocol::settings::Door;
use tokio::sync::watch;

use crate::places::{Batches, DeadPlaces};
use board::Board;
pub use driver::RoomDriver;
use frames::{Frames, Shown};
pub use view::{read_view, RoomView};

/// The most expired tickets a room remembers (8 bytes each, and the set's overhead: a few MB):
/// past it, an expired ticket asked about costs its script again.
const EXPIRED_KEPT: usize = 262_144;

/// How long a join waits for a new room's first view.
const FIRST_VIEW: std::time::Duration = std::time::Duration::from_secs(3);

/// One sale's room on this gateway; sessions subscribe to its view and ask it where they stand.
pub struct Room {
    view: watch::Receiver<RoomView>,
    shared: Arc<Shared>,
}

/// What the room task learns beyond the view, too big to copy every tick, and the sessions'
/// seats and messages.
struct Shared {
    draw: OnceLock<Draw>,
    dead: RwLock<DeadPlaces>,
    /// Tickets Redis said had expired for good (a place's standing, asked for): asked about
    /// again, they are answered from here. At most [`EXPIRED_KEPT`].
    expired: Mutex<std::collections::HashSet<u64>>,
    batches: Mutex<Batches>,
    board: Board,
    frames: Frames,
}

impl Shared {
    /// Heartbeats spread over `groups` slots of time.
    fn new(groups: u32) -> Self {
        Shared {
            draw: OnceLock::new(),
            dead: RwLock::default(),
            expired: Mutex::default(),
            batches: Mutex::default(),
            board: Board::new(groups),
            frames: Frames::default(),
        }
    }
}

impl Room {
    pub fn subscribe(&self) -> watch::Receiver<RoomView> {
        self.view.clone()
    }

    /// The room's latest view (held briefly: the room's task waits to publish the next).
    pub fn view(&self) -> watch::Ref<'_, RoomView> {
        self.view.borrow()
    }

    /// The seats of the room's sessions.
    pub fn board(&self) -> &Board {
        &self.shared.board
    }

    /// The message showing `shown`, made once per tick for everyone shown it.
    pub fn frame(&self, shown: Shown) -> tokio_tungstenite::tungstenite::Utf8Bytes {
        self.shared.frames.get(shown)
    }

    /// The sale's door as of the room's latest view; a room started just now is waited for
    /// (briefly: `None` if Redis cannot be read).
    pub async fn door(&self) -> Option<Door> {
        let mut view = self.view.clone();
        let door = tokio::time::timeout(FIRST_VIEW, view.wait_for(|v| v.loaded))
            .await
            .ok()?
            .ok()
            .map(|v| v.door);
        door
    }

    /// How long a departed client of this sale keeps its place: the sale's own grace, else the
    /// gateway's `default`.
    pub fn grace(&self, default: std::time::Duration) -> std::time::Duration {
        self.view.borrow().door.grace(default)
    }

    /// Tickets handed out per second, sale-wide, lately; and the lowest such rate of the last
    /// few seconds.
    pub fn join_rates(&self) -> (f64, f64) {
        let view = self.view.borrow();
        (view.join_rate, view.join_rate_low)
    }

    /// Whether `ticket`'s turn has come and gone: admitted, and its admission expired (or too
    /// long ago for this gateway to know when). Such a ticket can no longer book.
    pub fn turn_over(&self, ticket: u64, now_ms: i64) -> bool {
        let frontier = self.view.borrow().frontier;
        self.place(ticket).is_some_and(|place| {
            place <= frontier && self.token_expiry(place).is_none_or(|exp| exp <= now_ms)
        })
    }

    /// Whether `ticket` is known here to be out of the line for good: its place declared dead
    /// (its holder gone past the grace), its turn come and gone, or Redis said it expired. `false`
    /// when this gateway does not know (before the draw, say): only Redis can tell then.
    pub fn is_over(&self, ticket: u64, now_ms: i64) -> bool {
        self.is_expired(ticket) || self.turn_over(ticket, now_ms)
    }

    /// Whether `ticket` is known here to have expired: its place declared dead, or Redis said
    /// so when asked. A resume of it is refused as Redis would refuse it.
    pub fn is_expired(&self, ticket: u64) -> bool {
        let dead = self
            .place(ticket)
            .is_some_and(|place| self.shared.dead.read().expect("lock").contains(place));
        dead || self.shared.expired.lock().expect("lock").contains(&ticket)
    }

    /// Remembers that Redis said `ticket` expired for good (its grace ran out, or the sale
    /// ended), so that asking again costs no script.
    pub fn note_expired(&self, ticket: u64) {
        let mut expired = self.shared.expired.lock().expect("lock");
        if expired.len() < EXPIRED_KEPT {
            expired.insert(ticket);
        }
    }

    /// The place in line of `ticket`, once the pre-queue has been drawn.
    pub fn place(&self, ticket: u64) -> Option<u64> {
        self.shared.draw.get().map(|draw| draw.place(ticket))
    }

    /// Live tickets ahead of `place`, plus one. It overestimates by at most the tickets that
    /// died since this gateway last read the deaths stream (one tick), never underestimates.
    pub fn position(&self, place: u64, frontier: u64) -> u64 {
        let dead = self
            .shared
            .dead
            .read()
            .expect("lock")
            .between(frontier, place);
        place.saturating_sub(frontier).saturating_sub(dead).max(1)
    }

    /// When the admission token of an admitted `place` expires, if its batch is still known.
    pub fn token_expiry(&self, place: u64) -> Option<i64> {
        self.shared.batches.lock().expect("lock").expiry_of(place)
    }
}

#[cfg(test)]
impl Room {
    /// A room as its task leaves it once it has learnt `draw` and the places in `dead`.
    pub(crate) fn learnt(draw: Option<Draw>, dead: &[u64]) -> Self {
        let shared = Shared::new(1);
        if let Some(draw) = draw {
            let _ = shared.draw.set(draw);
        }
        for place in dead {
            shared.dead.write().expect("lock").insert(*place);
        }
        Room {
            view: watch::channel(RoomView::default()).1,
            shared: Arc::new(shared),
        }
    }
}
