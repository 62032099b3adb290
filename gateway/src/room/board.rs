//! Who in a room is woken, and why: every session has a seat on the room's board, and the room's
//! task tells a seat only when its session has something to send. That is what makes a waiting
//! client cheap: a session whose shown position has not moved (`floodgate_protocol::freshness`)
//! is not woken at all between its heartbeats, where it used to be woken on every tick that moved
//! the frontier (ten times a second, for nothing to say most of the time).
//!
//! A tick tells:
//! - [`news::MOVED`] to the seats whose shown position changed: everyone in the front
//!   [`EXACT_UP_TO`] (and anyone admitted) when the line moved, and further back only the places
//!   that crossed a value of the grid (`crossings.rs`); before the draw, everyone, when the
//!   pre-queue grew by a shown step;
//! - [`news::HEARTBEAT`] to the heartbeat groups whose turn came since the last tick: the groups
//!   take turns by the clock (not by ticks, which a busy gateway stretches), so each seat hears
//!   once per heartbeat and the room's heartbeats are spread over it rather than all at once;
//! - [`news::ROOM`] to everyone when something every session acts on changed (the first view,
//!   the draw, a pause or a resume, the opening's time, the end of the sale);
//! - [`news::CLOSING`] to everyone when the room's task ends (the gateway stops);
//! - [`news::TAKEN_OVER`] to a session whose place a newer session took back (on any gateway:
//!   `crate::scripts::taken_over`).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures::task::AtomicWaker;

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
    /// A newer session took this session's place back with its resume token.
    pub const TAKEN_OVER: u8 = 16;
}

/// One session's seat: what it was told since it last looked, and its task's waker. Small on
/// purpose (every waiting client has one): the bits and an `AtomicWaker`, no queue of waiters.
#[derive(Default)]
pub struct Seat {
    news: AtomicU8,
    waker: AtomicWaker,
}

impl Seat {
    fn tell(&self, news: u8) {
        self.news.fetch_or(news, Ordering::Release);
        self.waker.wake();
    }

    /// Waits for news and takes it. Cancel-safe: news told while nobody waits is kept in the
    /// bits, and the next call answers it at once.
    pub fn news(&self) -> impl std::future::Future<Output = u8> + '_ {
        std::future::poll_fn(move |cx| {
            let news = self.news.swap(0, Ordering::Acquire);
            if news != 0 {
                return Poll::Ready(news);
            }
            self.waker.register(cx.waker());
            // Told between the first look and the registration: the wake went to the old
            // waker, so look again.
            match self.news.swap(0, Ordering::Acquire) {
                0 => Poll::Pending,
                news => Poll::Ready(news),
            }
        })
    }
}

/// A session's place on the board: its slot (which also names its heartbeat group), its seat,
/// and the session's number on the gateway.
pub struct Sitting {
    pub slot: u32,
    pub seat: Arc<Seat>,
    pub number: u64,
}

/// Every seat of one room.
pub struct Board {
    seats: Mutex<Seats>,
}

struct Seats {
    /// Every seat, by slot; a slot's heartbeat group is the slot modulo `groups`. Freed slots
    /// are reused first, so the groups stay even.
    slots: Vec<Option<Arc<Seat>>>,
    free: Vec<u32>,
    groups: u32,
    /// The seats whose place is known, by place (and slot: a ticket resumed on this gateway may
    /// briefly have two sessions).
    placed: BTreeSet<(u64, u32)>,
    /// Each seat's slot by its session's number, for a session to be told it was taken over.
    numbers: HashMap<u64, u32>,
}

impl Board {
    /// A board whose heartbeats are spread over `groups` slots of time (at least one).
    pub fn new(groups: u32) -> Self {
        Board {
            seats: Mutex::new(Seats {
                slots: Vec::new(),
                free: Vec::new(),
                groups: groups.max(1),
                placed: BTreeSet::new(),
                numbers: HashMap::new(),
            }),
        }
    }

    /// Seats session `number`; it is told news from now on.
    pub fn sit(&self, number: u64) -> Sitting {
        let seat = Arc::new(Seat::default());
        let mut seats = self.seats.lock().expect("lock");
        let slot = match seats.free.pop() {
            Some(slot) => slot,
            None => {
                seats.slots.push(None);
                (seats.slots.len() - 1) as u32
            }
        };
        seats.slots[slot as usize] = Some(seat.clone());
        seats.numbers.insert(number, slot);
        Sitting { slot, seat, number }
    }

    /// The session in `slot` has its place: it is told when the line moves past it.
    pub fn place(&self, slot: u32, place: u64) {
        let mut seats = self.seats.lock().expect("lock");
        seats.placed.insert((place, slot));
    }

    /// The session `sitting` (at `place`, or 0 if it had none) has ended.
    pub fn leave(&self, sitting: &Sitting, place: u64) {
        let slot = sitting.slot;
        let mut seats = self.seats.lock().expect("lock");
        seats.numbers.remove(&sitting.number);
        if let Some(seated) = seats.slots.get_mut(slot as usize) {
            if seated.take().is_some() {
                seats.free.push(slot);
            }
        }
        if place > 0 {
            seats.placed.remove(&(place, slot));
        }
    }

    /// Tells session `number`, if it is seated here.
    pub fn tell_session(&self, number: u64, news: u8) {
        let seats = self.seats.lock().expect("lock");
        let slot = seats.numbers.get(&number).copied();
        if let Some(Some(seat)) = slot.and_then(|slot| seats.slots.get(slot as usize)) {
            seat.tell(news);
        }
    }

    /// Tells every seat.
    pub fn tell_all(&self, news: u8) {
        let seats = self.seats.lock().expect("lock");
        for seat in seats.slots.iter().flatten() {
            seat.tell(news);
        }
    }

    /// Tells the heartbeat groups of the time slots `due` (each time slot's group is itself
    /// modulo the number of groups; a span longer than that tells every group once).
    pub fn heartbeat(&self, due: std::ops::Range<u64>) {
        let seats = self.seats.lock().expect("lock");
        let groups = u64::from(seats.groups);
        for time_slot in due.take(groups as usize) {
            let group = (time_slot % groups) as usize;
            for seat in seats
                .slots
                .iter()
                .skip(group)
                .step_by(groups as usize)
                .flatten()
            {
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
            let within = (from.saturating_add(1), 0)..=(to, u32::MAX);
            for (_, slot) in seats.placed.range(within) {
                if let Some(Some(seat)) = seats.slots.get(*slot as usize) {
                    seat.tell(news::MOVED);
                    told += 1;
                }
            }
        }
        told
    }

    /// The furthest place seated (0: none).
    pub fn furthest(&self) -> u64 {
        let seats = self.seats.lock().expect("lock");
        seats.placed.last().map_or(0, |(place, _)| *place)
    }

    /// How many sessions are seated.
    #[cfg(test)]
    pub fn seated(&self) -> usize {
        let seats = self.seats.lock().expect("lock");
        seats.slots.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn seats_hear_what_they_are_told_and_nothing_else() {
        let board = Board::new(3);
        let seats: Vec<Sitting> = (0..6).map(|n| board.sit(100 + n)).collect();
        for (n, sitting) in seats.iter().enumerate() {
            assert_eq!(sitting.slot, n as u32);
            board.place(sitting.slot, 10 * (n as u64 + 1));
        }
        assert_eq!(board.furthest(), 60);
        assert_eq!(board.moved(&[(15, 40)]), 3, "places 20, 30 and 40");
        board.heartbeat(4..5); // group 1: slots 1 and 4
        assert_eq!(seats[1].seat.news().await, news::MOVED | news::HEARTBEAT);
        assert_eq!(seats[4].seat.news().await, news::HEARTBEAT);
        assert_eq!(seats[2].seat.news().await, news::MOVED);
        let quiet = [0, 5].map(|n| seats[n].seat.news.load(Ordering::Acquire));
        assert_eq!(quiet, [0, 0], "not told");
        board.leave(&seats[5], 60);
        assert_eq!(board.furthest(), 50);
        board.heartbeat(7..100); // every group once
        let all = [0, 1, 2, 3, 4]
            .map(|n| seats[n].seat.news.swap(0, Ordering::Acquire) & news::HEARTBEAT);
        assert_eq!(all, [news::HEARTBEAT; 5]);
        board.tell_all(news::CLOSING);
        assert_eq!(seats[0].seat.news().await, news::CLOSING);
        assert_eq!(seats[5].seat.news.load(Ordering::Acquire), 0, "gone");
        assert_eq!(board.seated(), 5);
        assert_eq!(board.sit(200).slot, 5, "a freed slot is taken first");
        board.tell_session(103, news::TAKEN_OVER);
        board.tell_session(105, news::TAKEN_OVER); // gone: nobody is told
        assert_ne!(seats[3].seat.news().await & news::TAKEN_OVER, 0);
        let quiet =
            [0, 1, 2, 4].map(|n| seats[n].seat.news.load(Ordering::Acquire) & news::TAKEN_OVER);
        assert_eq!(quiet, [0; 4], "only the session taken over is told");
    }

    #[tokio::test]
    async fn a_session_asleep_on_its_seat_is_woken() {
        let board = Board::new(1);
        let sitting = board.sit(1);
        let asleep = tokio::spawn({
            let seat = sitting.seat.clone();
            async move { seat.news().await }
        });
        // On this single-threaded runtime a yield lets it run: it registers and sleeps.
        tokio::task::yield_now().await;
        assert!(!asleep.is_finished(), "nothing told yet");
        board.tell_all(news::ROOM);
        let woken = tokio::time::timeout(std::time::Duration::from_secs(5), asleep).await;
        assert_eq!(woken.expect("woken").expect("ran"), news::ROOM);
    }
}
