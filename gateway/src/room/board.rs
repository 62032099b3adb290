//! Who in a room is woken, and why: every session has a seat on the room's board, and the room's
//! task tells a seat only when its session has something to send. That is what makes a waiting
//! client cheap: a session whose shown position has not moved (`floodgate_protocol::freshness`)
//! is not woken at all between its heartbeats, where it used to be woken on every tick that moved
//! the frontier (ten times a second, for nothing to say most of the time).
//!
//! A tick tells:
//! - [`news::MOVED`] to the seats whose shown position changed: everyone in the front
//!   [`EXACT_UP_TO`] (and anyone admitted) when the line moved, and further back only the places
//!   that crossed a value of the grid ([`Crossings`]); before the draw, everyone, when the
//!   pre-queue grew by a shown step;
//! - [`news::HEARTBEAT`] to the heartbeat groups whose turn came since the last tick: the groups
//!   take turns by the clock (not by ticks, which a busy gateway stretches), so each seat hears
//!   once per heartbeat and the room's heartbeats are spread over it rather than all at once;
//! - [`news::ROOM`] to everyone when something every session acts on changed (the first view,
//!   the draw, a pause or a resume, the opening's time, the end of the sale);
//! - [`news::CLOSING`] to everyone when the room's task ends (the gateway stops).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use floodgate_protocol::freshness::{next_shown, EXACT_UP_TO};
use tokio::sync::Notify;

use crate::places::DeadPlaces;

/// Why a seat was woken (bits; several may arrive together).
pub mod news {
    /// The session's shown position may have changed, or its turn may have come.
    pub const MOVED: u8 = 1;
    /// Its heartbeat is due: a ping and a fresh ETA.
    pub const HEARTBEAT: u8 = 2;
    /// Something every session acts on changed.
    pub const ROOM: u8 = 4;
    /// The room ended: the gateway is stopping.
    pub const CLOSING: u8 = 8;
}

/// One session's seat: what it was told since it last looked, and the wake-up.
#[derive(Default)]
pub struct Seat {
    notify: Notify,
    news: AtomicU8,
}

impl Seat {
    fn tell(&self, news: u8) {
        self.news.fetch_or(news, Ordering::Release);
        self.notify.notify_one();
    }

    /// Waits for news and takes it. Cancel-safe: news told while nobody waits is kept in the
    /// bits, and the next call answers it at once.
    pub async fn news(&self) -> u8 {
        loop {
            let news = self.news.swap(0, Ordering::Acquire);
            if news != 0 {
                return news;
            }
            self.notify.notified().await;
        }
    }
}

/// Every seat of one room.
pub struct Board {
    seats: Mutex<Seats>,
}

#[derive(Default)]
struct Seats {
    /// Every seat, in heartbeat groups by session number.
    groups: Vec<HashMap<u64, Arc<Seat>>>,
    /// The seats whose place is known, by place (and session number: a ticket resumed on this
    /// gateway may briefly have two sessions).
    placed: BTreeMap<(u64, u64), Arc<Seat>>,
}

impl Board {
    /// A board whose heartbeats are spread over `groups` ticks (at least one).
    pub fn new(groups: usize) -> Self {
        let groups = (0..groups.max(1)).map(|_| HashMap::new()).collect();
        Board {
            seats: Mutex::new(Seats {
                groups,
                placed: BTreeMap::new(),
            }),
        }
    }

    /// Seats session `number`; it is told news from now on.
    pub fn sit(&self, number: u64) -> Arc<Seat> {
        let seat = Arc::new(Seat::default());
        let mut seats = self.seats.lock().expect("lock");
        let group = seats.group(number);
        seats.groups[group].insert(number, seat.clone());
        seat
    }

    /// Session `number`'s place is known: it is told when the line moves past it.
    pub fn place(&self, number: u64, place: u64, seat: &Arc<Seat>) {
        let mut seats = self.seats.lock().expect("lock");
        seats.placed.insert((place, number), seat.clone());
    }

    /// Session `number` (at `place`, or 0 if it had none) has ended.
    pub fn leave(&self, number: u64, place: u64) {
        let mut seats = self.seats.lock().expect("lock");
        let group = seats.group(number);
        seats.groups[group].remove(&number);
        if place > 0 {
            seats.placed.remove(&(place, number));
        }
    }

    /// Tells every seat.
    pub fn tell_all(&self, news: u8) {
        let seats = self.seats.lock().expect("lock");
        for seat in seats.groups.iter().flat_map(HashMap::values) {
            seat.tell(news);
        }
    }

    /// Tells the heartbeat groups of `slots` (each slot's group is the slot modulo the number
    /// of groups; a span longer than that tells every group once).
    pub fn heartbeat(&self, slots: std::ops::Range<u64>) {
        let seats = self.seats.lock().expect("lock");
        let groups = seats.groups.len() as u64;
        for slot in slots.take(groups as usize) {
            for seat in seats.groups[(slot % groups) as usize].values() {
                seat.tell(news::HEARTBEAT);
            }
        }
    }

    /// Tells the placed seats in each range of places (`from` exclusive, `to` inclusive) that
    /// the line moved past them.
    pub fn moved(&self, ranges: &[(u64, u64)]) -> usize {
        let seats = self.seats.lock().expect("lock");
        let mut told = 0;
        for &(from, to) in ranges {
            let within = (from.saturating_add(1), 0)..=(to, u64::MAX);
            for seat in seats.placed.range(within).map(|(_, seat)| seat) {
                seat.tell(news::MOVED);
                told += 1;
            }
        }
        told
    }

    /// The furthest place seated (0: none).
    pub fn furthest(&self) -> u64 {
        let seats = self.seats.lock().expect("lock");
        seats
            .placed
            .last_key_value()
            .map_or(0, |((place, _), _)| *place)
    }

    /// How many sessions are seated.
    #[cfg(test)]
    pub fn seated(&self) -> usize {
        let seats = self.seats.lock().expect("lock");
        seats.groups.iter().map(HashMap::len).sum()
    }
}

impl Seats {
    fn group(&self, number: u64) -> usize {
        (number % self.groups.len() as u64) as usize
    }
}

/// Which places' shown positions a tick changed. A place's position is 1 plus the live places
/// between the frontier and it; its shown value changes when the position crosses a value of
/// the grid. For each grid value `g` the places shown at most `g` are a prefix of the line,
/// `1..=reach(g)`; a tick that moved the frontier (or learnt of deaths) moved each reach
/// forward, and the places between a reach's old and new ends are exactly those whose shown
/// value crossed `g`. The front [`EXACT_UP_TO`] positions are shown exactly, so the whole front
/// is told whenever the line moved at all.
#[derive(Debug, Default)]
pub struct Crossings {
    /// The frontier and deaths known at the last tick; `None` before the first.
    last: Option<(u64, u64)>,
    /// reach(g) at the last tick, for g = EXACT_UP_TO and each grid value after it in turn.
    reach: Vec<u64>,
}

impl Crossings {
    /// The ranges of places (exclusive start, inclusive end) whose shown position changed since
    /// the last call, for a line whose frontier is now `frontier` and whose known deaths are
    /// `dead`; places past `furthest` (the last seated) are not looked at.
    pub fn advance(&mut self, frontier: u64, dead: &DeadPlaces, furthest: u64) -> Vec<(u64, u64)> {
        let now = (frontier, dead.total());
        let moved = self.last.is_some_and(|last| last != now);
        let first = self.last.is_none();
        self.last = Some(now);
        if !(moved || first) {
            return Vec::new();
        }
        // Positions count the live places after the frontier: reach(g) is the furthest place
        // with at most g - 1 live places between the frontier and it.
        let before = frontier - dead.up_to(frontier);
        let reach = |g: u64| dead.furthest_with_live(before + g - 1) + 1;
        let mut ranges = Vec::new();
        let mut g = EXACT_UP_TO;
        let (mut i, mut previous) = (0, 0);
        loop {
            let new = reach(g);
            let old = self.reach.get(i).copied();
            match old {
                _ if !moved => {}
                _ if i == 0 => ranges.push((0, new)),
                Some(old) if old < new => push_merged(&mut ranges, (old, new)),
                Some(_) => {}
                // Past the last tick's walk (seats placed since, further back than any before):
                // no old reach to compare with, so everyone between this value and the one
                // before is told. Only seats new since the last tick can be there.
                None => push_merged(&mut ranges, (previous, new)),
            }
            previous = new;
            match self.reach.get_mut(i) {
                Some(slot) => *slot = new,
                None => self.reach.push(new),
            }
            // Stop once every seat is within the reach walked so far (then no further grid
            // value is crossed by anyone seated).
            if new >= furthest && old.is_none_or(|old| old >= furthest) {
                break;
            }
            g = next_shown(g);
            i += 1;
        }
        self.reach.truncate(i + 1);
        ranges
    }
}

/// Adds `range` to `ranges`, joining it to the last one where they touch.
fn push_merged(ranges: &mut Vec<(u64, u64)>, range: (u64, u64)) {
    match ranges.last_mut() {
        Some(last) if range.0 <= last.1 => last.1 = last.1.max(range.1),
        _ => ranges.push(range),
    }
}

#[cfg(test)]
mod tests {
    use floodgate_protocol::freshness::shown;

    use super::*;

    /// The shown position of `place` for a line at `frontier` with `dead` known.
    fn shown_at(place: u64, frontier: u64, dead: &DeadPlaces) -> Option<u64> {
        (place > frontier).then(|| shown(place - frontier - dead.between(frontier, place)))
    }

    fn covered(ranges: &[(u64, u64)], place: u64) -> bool {
        ranges
            .iter()
            .any(|(from, to)| place > *from && place <= *to)
    }

    /// Every place whose shown position changed is in a range told; and (past the exact front)
    /// no place whose shown position stayed is.
    fn check(
        before: (u64, &DeadPlaces),
        after: (u64, &DeadPlaces),
        ranges: &[(u64, u64)],
        furthest: u64,
    ) {
        for place in 1..=furthest {
            let old = shown_at(place, before.0, before.1);
            let new = shown_at(place, after.0, after.1);
            if old != new {
                assert!(
                    covered(ranges, place),
                    "place {place}: {old:?} -> {new:?} not told"
                );
            } else if old.is_some_and(|s| s > EXACT_UP_TO) {
                assert!(
                    !covered(ranges, place),
                    "place {place} told for nothing ({old:?})"
                );
            }
        }
    }

    #[test]
    fn a_moving_frontier_tells_the_front_and_the_grid_crossings_only() {
        let dead = DeadPlaces::default();
        let furthest = 30_000;
        let mut crossings = Crossings::default();
        assert!(
            crossings.advance(0, &dead, furthest).is_empty(),
            "the first tick is where sessions start: nothing moved yet"
        );
        let mut frontier = 0;
        for step in [1, 3, 17, 250, 1_000, 2] {
            let ranges = crossings.advance(frontier + step, &dead, furthest);
            check(
                (frontier, &dead),
                (frontier + step, &dead),
                &ranges,
                furthest,
            );
            frontier += step;
        }
        assert!(
            crossings.advance(frontier, &dead, furthest).is_empty(),
            "nothing moved"
        );
    }

    #[test]
    fn deaths_ahead_move_the_places_behind_them() {
        let mut dead = DeadPlaces::default();
        let furthest = 12_000;
        let mut crossings = Crossings::default();
        crossings.advance(100, &dead, furthest);
        let before = DeadPlaces::default();
        for place in [150, 2_000, 2_001, 5_005, 9_000, 9_001, 9_002] {
            dead.insert(place);
        }
        let ranges = crossings.advance(100, &dead, furthest);
        check((100, &before), (100, &dead), &ranges, furthest);
        assert!(covered(&ranges, 1_050), "in the exact front");
        assert!(!covered(&ranges, 11_955), "shown 11,900 before and after");
    }

    #[test]
    fn the_walk_stops_at_the_furthest_seat() {
        let dead = DeadPlaces::default();
        let mut crossings = Crossings::default();
        crossings.advance(0, &dead, 5_000);
        let ranges = crossings.advance(5_000, &dead, 5_000);
        assert!(ranges.iter().all(|(_, to)| *to <= 20_000), "{ranges:?}");
        assert!(
            crossings.reach.len() < 500,
            "{} grid values kept",
            crossings.reach.len()
        );
    }

    #[tokio::test]
    async fn seats_hear_what_they_are_told_and_nothing_else() {
        let board = Board::new(3);
        let seats: Vec<_> = (0..6).map(|n| board.sit(n)).collect();
        for (n, seat) in seats.iter().enumerate() {
            board.place(n as u64, 10 * (n as u64 + 1), seat);
        }
        assert_eq!(board.furthest(), 60);
        assert_eq!(board.moved(&[(15, 40)]), 3, "places 20, 30 and 40");
        board.heartbeat(4..5); // group 1: sessions 1 and 4
        assert_eq!(seats[1].news().await, news::MOVED | news::HEARTBEAT);
        assert_eq!(seats[4].news().await, news::HEARTBEAT);
        assert_eq!(seats[2].news().await, news::MOVED);
        let quiet = [0, 5].map(|n| seats[n].news.load(Ordering::Acquire));
        assert_eq!(quiet, [0, 0], "not told");
        board.leave(5, 60);
        assert_eq!(board.furthest(), 50);
        board.heartbeat(7..100); // every group once
        let all =
            [0, 1, 2, 3, 4].map(|n| seats[n].news.swap(0, Ordering::Acquire) & news::HEARTBEAT);
        assert_eq!(all, [news::HEARTBEAT; 5]);
        board.tell_all(news::CLOSING);
        assert_eq!(seats[0].news().await, news::CLOSING);
        assert_eq!(seats[5].news.load(Ordering::Acquire), 0, "gone");
        assert_eq!(board.seated(), 5);
    }
}
