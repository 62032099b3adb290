//! How many people the admission leader may let in at one tick, whatever paces it: the live
//! people still waiting, the room under the cap on active users, and what the stock can serve.
//! Pure, so that the leader (the gateway's room controller) and the sale simulator
//! (`floodgate-loadgen simulate`) admit by the same rule.

use std::time::Duration;

/// What one tick of admission knows of the sale.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Room {
    /// People in line past the frontier who are still there.
    pub live_waiting: u64,
    pub active_cap: u64,
    /// Admitted people whose token is not yet spent (nor expired, nor past the sale's hold on
    /// the stock), and who are there.
    pub unspent: u64,
    /// Live holds (reservations neither paid nor expired; one may hold several seats).
    pub holds: u64,
    /// Seats available in every pool together.
    pub available: u64,
    /// Unspent tokens allowed per available seat.
    pub stock_factor: f64,
}

impl Room {
    /// The most this tick may admit, before the rate limiter: the active (unspent tokens and
    /// holds) stay under the cap, and the unspent tokens under `stock_factor` per available seat
    /// (nobody is let in to a page with nothing left to hold).
    pub fn allowed(&self) -> u64 {
        let active = self.unspent + self.holds;
        let cap_room = self.active_cap.saturating_sub(active);
        let stock_room = ((self.stock_factor * self.available as f64).floor() as u64)
            .saturating_sub(self.unspent);
        self.live_waiting.min(cap_room).min(stock_room)
    }
}

/// The rate limiter's burst at `rate` a second, ticking every `tick`: one tick's worth, at least
/// one, so a tick admits no more than its share even after a pause.
pub fn burst(rate: f64, tick: Duration) -> u32 {
    (rate * tick.as_secs_f64())
        .ceil()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tightest_of_line_cap_and_stock_bounds_a_tick() {
        let room = Room {
            live_waiting: 1_000,
            active_cap: 500,
            unspent: 100,
            holds: 50,
            available: 200,
            stock_factor: 2.0,
        };
        // Cap: 500 - 150 = 350; stock: 400 - 100 = 300; line: 1,000.
        assert_eq!(room.allowed(), 300);
        assert_eq!(
            Room {
                available: 1_000,
                ..room
            }
            .allowed(),
            350
        );
        assert_eq!(
            Room {
                live_waiting: 7,
                ..room
            }
            .allowed(),
            7
        );
        // Nothing available: nobody more, however many wait.
        assert_eq!(
            Room {
                available: 0,
                ..room
            }
            .allowed(),
            0
        );
        assert_eq!(
            Room {
                unspent: 600,
                ..room
            }
            .allowed(),
            0
        );
    }

    #[test]
    fn a_burst_is_one_ticks_worth_and_at_least_one() {
        assert_eq!(burst(500.0, Duration::from_millis(100)), 50);
        assert_eq!(burst(2.0, Duration::from_millis(100)), 1);
        assert_eq!(burst(15.0, Duration::from_millis(100)), 2);
    }
}
