//! What a session shows its client, decided from the room's view alone: where it stands (its
//! place once drawn, the lowest position so far) and what a view means (wait, show, admit, sold
//! out). What is shown follows the freshness contract (`floodgate_protocol::freshness`): the
//! exact position at the front of the line, the grid's value further back. Pure logic, tested
//! on its own; the session does the sending.

use floodgate_protocol::freshness;
use floodgate_protocol::UnixMillis;

use crate::room::frames::Shown;
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
            // The grid's value: the same for everyone near this place, so the message is
            // shared, and it changes (waking this session) only when it moved by a step.
            let position = freshness::shown(lowest);
            Step::Show(Shown::Position {
                position,
                eta_secs: view.eta_secs(position, now_ms),
            })
        }
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn far_back_the_grid_value_is_shown_and_its_eta() {
        let (room, draw) = drawn(30_000, &[]);
        let ticket = (1..=30_000)
            .find(|t| draw.place(*t) == 25_001)
            .expect("a ticket at place 25,001");
        let mut standing = Standing::default();
        let Step::Show(shown) = step(&room, ticket, 0, &view(0), &mut standing, 2_000) else {
            panic!("waiting");
        };
        assert_eq!(
            shown,
            Shown::Position {
                position: 25_200,
                eta_secs: Some(2_520)
            },
            "25,001 on a grid of 200, at 10 a second"
        );
    }
}
