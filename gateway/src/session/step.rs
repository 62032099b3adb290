//! What a session shows its client, decided from the room's view alone: where it stands (its
//! place once drawn, the lowest position so far), what a new view means (wait, show, admit,
//! sold out), and the coalescing of what is shown to one message per interval. Pure logic,
//! tested on its own; the session does the sending.

use floodgate_protocol::ws::ServerMessage;
use floodgate_protocol::UnixMillis;
use tokio::time::Instant;

use crate::room::{Room, RoomView};

/// Where a session stands: its place once drawn (places start at 1; 0 is "not drawn yet"), and
/// the lowest position computed so far. Plain integers: every idle session carries them.
pub(super) struct Standing {
    place: u64,
    lowest: u64,
}

impl Default for Standing {
    fn default() -> Self {
        Self {
            place: 0,
            lowest: u64::MAX,
        }
    }
}

/// What a session does after a new view.
pub(super) enum Step {
    Wait,
    SoldOut,
    Admit { place: u64, max_seats: u32 },
    Show(Shown),
}

/// A coalescable message: what the client is shown while it waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shown {
    PreQueue {
        size: u64,
        opens_at_ms: i64,
    },
    Position {
        position: u64,
        eta_secs: Option<u64>,
    },
}

impl Shown {
    pub(super) fn message(self) -> ServerMessage {
        match self {
            Shown::PreQueue { size, opens_at_ms } => ServerMessage::PreQueue { size, opens_at_ms },
            Shown::Position { position, eta_secs } => {
                ServerMessage::Position { position, eta_secs }
            }
        }
    }
}

/// What a new `view` means for the session of `ticket` in `room` (resumed with the frontier it
/// saw then, `frontier_floor`), at `now_ms`.
pub(super) fn step(
    room: &Room,
    ticket: u64,
    frontier_floor: u64,
    view: &RoomView,
    standing: &mut Standing,
    now_ms: UnixMillis,
) -> Step {
    if !view.loaded {
        return Step::Wait;
    }
    if view.sold_out {
        return Step::SoldOut;
    }
    // The place never changes once drawn: evaluate the permutation (a few hashes) once per
    // session, not on every view of every tick.
    if standing.place == 0 {
        standing.place = room.place(ticket).unwrap_or(0);
    }
    match Some(standing.place).filter(|p| *p > 0) {
        None => Step::Show(Shown::PreQueue {
            size: view.issued,
            opens_at_ms: view.opens_at_ms,
        }),
        Some(place) if place <= view.frontier => Step::Admit {
            place,
            max_seats: view.max_seats,
        },
        Some(place) => {
            // Never up: a later view may briefly know fewer deaths than an earlier one (a
            // catching-up gateway), and a resumed session starts from the frontier it saw.
            let frontier = view.frontier.max(frontier_floor);
            let lowest = standing.lowest.min(room.position(place, frontier));
            standing.lowest = lowest;
            Step::Show(Shown::Position {
                position: lowest,
                eta_secs: view.eta_secs(lowest, now_ms),
            })
        }
    }
}

/// What the client was last shown, what it is to be shown next, and when it may be: at most
/// one message per interval, the newest value winning.
#[derive(Debug)]
pub(super) struct Coalescer {
    shown: Option<Shown>,
    pending: Option<Shown>,
    next_at: Instant,
}

impl Coalescer {
    /// Nothing shown yet; the first message may go at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            shown: None,
            pending: None,
            next_at: now,
        }
    }

    /// A newer value replaces a pending one, even when it is back to what the client already
    /// shows (then nothing is sent).
    pub(super) fn offer(&mut self, next: Shown) {
        self.pending = (self.shown != Some(next)).then_some(next);
    }

    /// The message to send now, if one is pending and its interval has passed.
    pub(super) fn due(&mut self, now: Instant) -> Option<Shown> {
        self.pending.filter(|_| now >= self.next_at)
    }

    /// `shown` was sent; the next may go at `next_at`.
    pub(super) fn sent(&mut self, shown: Shown, next_at: Instant) {
        self.pending = None;
        self.shown = Some(shown);
        self.next_at = next_at;
    }

    /// When the pending message may go, if one waits.
    pub(super) fn waiting_until(&self) -> Option<Instant> {
        self.pending.map(|_| self.next_at)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use floodgate_protocol::lottery::Draw;

    use super::*;

    /// A room whose draw puts every ticket in a place of its own.
    fn drawn(size: u64, dead: &[u64]) -> (Room, Draw) {
        let draw = Draw::new([9; 32], size);
        (Room::learnt(Some(draw.clone()), dead), draw)
    }

    fn view(frontier: u64) -> RoomView {
        RoomView {
            loaded: true,
            frontier,
            issued: 100,
            opens_at_ms: 1_000,
            rate: 10.0,
            max_seats: 4,
            ..RoomView::default()
        }
    }

    #[test]
    fn nothing_is_shown_before_the_first_view_and_sold_out_ends_the_wait() {
        let (room, _) = drawn(100, &[]);
        let mut standing = Standing::default();
        let unloaded = RoomView::default();
        assert!(matches!(
            step(&room, 1, 0, &unloaded, &mut standing, 2_000),
            Step::Wait
        ));
        let over = RoomView {
            sold_out: true,
            ..view(0)
        };
        assert!(matches!(
            step(&room, 1, 0, &over, &mut standing, 2_000),
            Step::SoldOut
        ));
    }

    #[test]
    fn before_the_draw_the_client_sees_the_prequeue() {
        let room = Room::learnt(None, &[]);
        let mut standing = Standing::default();
        let before = step(&room, 7, 0, &view(0), &mut standing, 500);
        assert!(matches!(
            before,
            Step::Show(Shown::PreQueue {
                size: 100,
                opens_at_ms: 1_000
            })
        ));
    }

    #[test]
    fn a_drawn_place_waits_its_turn_then_is_admitted() {
        let (room, draw) = drawn(100, &[]);
        let ticket = (1..=100)
            .find(|t| draw.place(*t) == 30)
            .expect("a ticket at place 30");
        let mut standing = Standing::default();
        let Step::Show(Shown::Position { position, eta_secs }) =
            step(&room, ticket, 0, &view(10), &mut standing, 2_000)
        else {
            panic!("place 30 waits behind a frontier of 10");
        };
        assert_eq!(position, 20, "live tickets ahead, plus one");
        assert_eq!(eta_secs, Some(2), "20 places at 10 a second");
        assert!(matches!(
            step(&room, ticket, 0, &view(30), &mut standing, 2_000),
            Step::Admit {
                place: 30,
                max_seats: 4
            }
        ));
    }

    #[test]
    fn the_dead_ahead_are_not_counted_and_positions_never_go_up() {
        let (room, draw) = drawn(100, &[12, 15]);
        let ticket = (1..=100)
            .find(|t| draw.place(*t) == 30)
            .expect("a ticket at place 30");
        let mut standing = Standing::default();
        let shown = |s: Step| match s {
            Step::Show(Shown::Position { position, .. }) => position,
            _ => panic!("a position"),
        };
        assert_eq!(
            shown(step(&room, ticket, 0, &view(10), &mut standing, 0)),
            18
        );
        // A view from a gateway that is behind (a lower frontier) never raises it.
        assert_eq!(
            shown(step(&room, ticket, 0, &view(5), &mut standing, 0)),
            18
        );
        // A resumed session starts from the frontier it saw elsewhere.
        let mut resumed = Standing::default();
        assert_eq!(
            shown(step(&room, ticket, 20, &view(5), &mut resumed, 0)),
            10
        );
    }

    fn at(position: u64) -> Shown {
        Shown::Position {
            position,
            eta_secs: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn positions_are_coalesced_to_one_message_per_interval_newest_first() {
        let interval = Duration::from_millis(500);
        let start = Instant::now();
        let mut shown = Coalescer::new(start);
        shown.offer(at(9));
        assert_eq!(
            shown.due(Instant::now()),
            Some(at(9)),
            "the first goes at once"
        );
        shown.sent(at(9), Instant::now() + interval);

        shown.offer(at(8));
        shown.offer(at(7));
        assert_eq!(shown.due(Instant::now()), None, "not within the interval");
        assert_eq!(shown.waiting_until(), Some(start + interval));
        tokio::time::advance(interval).await;
        assert_eq!(
            shown.due(Instant::now()),
            Some(at(7)),
            "only the newest is sent"
        );
        shown.sent(at(7), Instant::now() + interval);

        tokio::time::advance(interval).await;
        shown.offer(at(7));
        assert_eq!(
            shown.due(Instant::now()),
            None,
            "what the client shows is not sent again"
        );
        assert_eq!(shown.waiting_until(), None);
    }
}
