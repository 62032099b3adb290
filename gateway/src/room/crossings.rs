//! Which places a tick moved past a value of the freshness grid: the room wakes those seats
//! and no others (`board.rs`).

use floodgate_protocol::freshness::{next_shown, EXACT_UP_TO};

use crate::places::DeadPlaces;

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
}
