//! The waiting room's freshness contract: how far a waiting client's shown position may be from
//! the truth, and how long it may go without a message. The gateway pushes by it; a client (and
//! the load generator, which measures it) checks by it. docs/protocol.md, section 1.2, says it in
//! prose.
//!
//! - The next [`EXACT_UP_TO`] people in line see their exact position within one tick of the
//!   gateway learning it.
//! - Everyone further back is shown their position rounded up to a grid whose step is a hundredth
//!   of the segment it lies in ([`shown`]): never more than 1 % of it (or 10 places, whichever is
//!   larger) above the truth, and never below it. The grid is the same for everyone, so a room's
//!   messages are shared: everyone shown 48,600 gets the same bytes.
//! - Everyone hears from the gateway at least every [`HEARTBEAT`] (a position with a fresh ETA),
//!   and `sold_out`, admission and a pause are never delayed.

use std::time::Duration;

/// Positions up to this one are shown exactly.
pub const EXACT_UP_TO: u64 = 1_000;

/// The longest a waiting client goes without a message (each carrying a fresh ETA).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// How far the shown position may be from `position`: nothing up to [`EXACT_UP_TO`], else a
/// hundredth of it, at least 10 places.
pub fn allowance(position: u64) -> u64 {
    if position <= EXACT_UP_TO {
        0
    } else {
        (position / 100).max(10)
    }
}

/// What a client at `position` is shown: the position itself up to [`EXACT_UP_TO`], else the
/// smallest grid value at or above it. Never below the position, and below it plus
/// [`allowance`].
pub fn shown(position: u64) -> u64 {
    if position <= EXACT_UP_TO {
        return position;
    }
    let step = step_for(position);
    position.div_ceil(step).saturating_mul(step)
}

/// The grid value after `value` (a grid value: every position up to [`EXACT_UP_TO`] is one, and
/// so is anything [`shown`] answers). Walking from 1 with this visits every value a client can
/// be shown, in order.
pub fn next_shown(value: u64) -> u64 {
    let above = value.saturating_add(1);
    if above <= EXACT_UP_TO {
        above
    } else {
        shown(above)
    }
}

/// The grid's step for a position beyond [`EXACT_UP_TO`]: the grid is cut into segments at
/// 1,000, 2,000, 5,000, 10,000, 20,000, 50,000 and so on, and a segment's step is a hundredth of
/// its lower end, so the step is at most 1 % of any position in the segment (10 in (1000,
/// 2000], 20 in (2000, 5000], 50 in (5000, 10000], 100 in (10000, 20000], ...).
fn step_for(position: u64) -> u64 {
    let mut low = EXACT_UP_TO;
    loop {
        // The next cut: 1 -> 2 -> 5 -> 10 times a power of ten.
        let next = if leading_digit(low) == 2 {
            low / 2 * 5
        } else {
            low.saturating_mul(2)
        };
        if position <= next || next == low {
            return low / 100;
        }
        low = next;
    }
}

fn leading_digit(mut n: u64) -> u64 {
    while n >= 10 {
        n /= 10;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_of_the_line_is_exact() {
        for position in [1, 2, 10, 999, 1_000] {
            assert_eq!(shown(position), position);
            assert_eq!(allowance(position), 0);
        }
    }

    #[test]
    fn further_back_the_grid_is_nice_numbers_a_hundredth_apart() {
        assert_eq!(shown(1_001), 1_010);
        assert_eq!(shown(1_010), 1_010);
        assert_eq!(shown(2_000), 2_000);
        assert_eq!(shown(2_001), 2_020);
        assert_eq!(shown(5_001), 5_050);
        assert_eq!(shown(10_001), 10_100);
        assert_eq!(shown(48_401), 48_600);
        assert_eq!(shown(48_400), 48_400);
        assert_eq!(shown(1_999_999), 2_000_000);
        assert_eq!(shown(2_000_001), 2_020_000);
    }

    #[test]
    fn a_shown_position_is_never_below_the_truth_nor_past_its_allowance() {
        let mut position = 1;
        while position < 30_000_000 {
            let shown = shown(position);
            assert!(shown >= position, "{position} shown as {shown}");
            assert!(
                shown - position <= allowance(position),
                "{position} shown as {shown}, allowance {}",
                allowance(position)
            );
            // Every position, then a sample further out.
            position += if position < 60_000 { 1 } else { 997 };
        }
    }

    #[test]
    fn walking_the_grid_visits_every_shown_value_in_order() {
        let mut value = 0;
        let mut walked = Vec::new();
        while value < 120_000 {
            value = next_shown(value);
            walked.push(value);
        }
        let mut seen: Vec<u64> = (1..=120_000).map(shown).collect();
        seen.dedup();
        assert_eq!(walked[..seen.len()], seen[..]);
        // Each value walked is its own shown value: a fixed point of the grid.
        assert!(walked.iter().all(|v| shown(*v) == *v));
    }

    #[test]
    fn huge_positions_do_not_overflow() {
        assert!(shown(u64::MAX) >= u64::MAX - 1);
        assert!(next_shown(u64::MAX) >= u64::MAX - 1);
    }
}
