//! How hard the proof of work is: the sale's own difficulty, within bounds, and how it rises by
//! itself under a flood of joins.

use crate::settings::POW_DIFFICULTY;

/// How the proof of work rises by itself under a flood of joins: one bit as the sale's join rate
/// passes `rise_above` joins a second, and one more for each doubling beyond, never past
/// `ceiling` (the most an honest buyer's phone solves within its budget, BENCHMARKS.md). Every
/// gateway computes the same from the sale's ticket sequence, so they agree without talking.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoDifficulty {
    /// Joins a second, sale-wide, past which the difficulty rises (0 or less: it never does).
    pub rise_above: f64,
    /// The most the difficulty rises to; a sale whose own difficulty is higher keeps its own.
    pub ceiling: u8,
}

impl AutoDifficulty {
    /// The difficulty puzzles are handed out at, for a sale asking `base` bits while joins
    /// come at `joins_per_sec`.
    pub fn at(&self, base: u8, joins_per_sec: f64) -> u8 {
        // NaN compares false: no measured rate is no rise.
        let flooding = joins_per_sec > self.rise_above;
        if self.rise_above <= 0.0 || !flooding || base >= self.ceiling {
            return base;
        }
        let doublings = (joins_per_sec / self.rise_above).log2().floor().max(0.0);
        let raised = u32::from(base) + 1 + doublings.min(64.0) as u32;
        raised.min(u32::from(self.ceiling)) as u8
    }
}

/// Whether `difficulty` is one a sale may ask for.
pub fn check_difficulty(difficulty: i64) -> Result<u8, String> {
    u8::try_from(difficulty)
        .ok()
        .filter(|d| POW_DIFFICULTY.contains(d))
        .ok_or_else(|| {
            format!(
                "pow_difficulty must be a whole number of bits from {} to {}",
                POW_DIFFICULTY.start(),
                POW_DIFFICULTY.end()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difficulty_rises_a_bit_per_doubling_of_joins_up_to_its_ceiling() {
        let auto = AutoDifficulty {
            rise_above: 100.0,
            ceiling: 19,
        };
        assert_eq!(auto.at(16, 0.0), 16);
        assert_eq!(auto.at(16, 100.0), 16, "at the threshold: no rise");
        assert_eq!(auto.at(16, 150.0), 17);
        assert_eq!(auto.at(16, 200.0), 18);
        assert_eq!(auto.at(16, 399.0), 18);
        assert_eq!(auto.at(16, 400.0), 19);
        assert_eq!(auto.at(16, 1e12), 19, "never past the ceiling");
        assert_eq!(auto.at(20, 1e12), 20, "a sale asking more keeps its own");
        let off = AutoDifficulty {
            rise_above: 0.0,
            ceiling: 30,
        };
        assert_eq!(off.at(16, 1e9), 16);
        assert_eq!(auto.at(16, f64::NAN), 16);
    }

    #[test]
    fn difficulties_have_bounds() {
        assert_eq!(check_difficulty(16), Ok(16));
        assert!(check_difficulty(0).is_err());
        assert!(check_difficulty(33).is_err());
        assert!(check_difficulty(-1).is_err());
    }
}
