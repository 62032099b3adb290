//! A short rolling window of latencies and outcomes: what a service measures of the work a sale
//! gives it, to publish in its health summary ([`super::Health`]). Fixed memory whatever the
//! load (a histogram of logarithmic buckets, not the samples), a p99 read in one pass over the
//! buckets, and two halves taking turns, so a reading always covers between one and two spans
//! of the most recent past and forgets anything older.
//!
//! A sale's windows count what the sale's people experience, each person once: a request is
//! recorded under its pass ([`SaleWindows::record`]), and a pass already recorded in the current
//! half is not recorded again. A client's own duplicates (a replay flood of one pass from many
//! connections) thus weigh what one request weighs, and cannot drag the sale's p99 or error share
//! where the autopilot would cut the rate for everyone. Memory grows with the distinct passes of
//! a span, which admission bounds.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Buckets per half: bucket `i` holds latencies up to `FIRST_BOUND_US * 2^(i / 4)`, so each is
/// about 19 % wider than the one before and the last (above 6.5 s) holds everything slower.
const BUCKETS: usize = 65;
const FIRST_BOUND_US: f64 = 100.0;
const PER_DOUBLING: f64 = 4.0;
/// How much wider each bucket is than the one before, 2^(1/4): a p99 read as its bucket's top
/// is never under the truth and at most this much over it.
pub const BUCKET_WIDTH: f64 = 1.189_207_115_002_721;

/// The span services' windows use: a reading covers the last 5 to 10 s, long enough for a p99 at
/// a modest rate and short enough that the autopilot sees a change within a few of its steps.
pub const SPAN: Duration = Duration::from_secs(5);

/// The key a pass is counted under: its sale and token id, hashed (the same pass gives the same
/// key in every process of a version, which is all a window or a limit needs).
pub fn pass_key(sale: &str, jti: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (sale, jti).hash(&mut hasher);
    hasher.finish()
}

/// A rolling window over `span` to `2 * span`.
#[derive(Clone, Debug)]
pub struct Window {
    span_ms: i64,
    halves: [Half; 2],
    /// The half being written, and when it started.
    current: usize,
    started_ms: i64,
}

#[derive(Clone, Debug)]
struct Half {
    buckets: [u32; BUCKETS],
    count: u64,
    errors: u64,
    /// The passes recorded in this half (their keys), each once.
    passes: std::collections::HashSet<u64>,
}

impl Default for Half {
    fn default() -> Self {
        Self {
            buckets: [0; BUCKETS],
            count: 0,
            errors: 0,
            passes: std::collections::HashSet::new(),
        }
    }
}

/// What a window holds now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// Requests recorded in the window.
    pub count: u64,
    /// Their share that failed; `None` with nothing recorded.
    pub error_share: Option<f64>,
    /// Their 99th percentile latency (the upper bound of its bucket, so never under the truth
    /// and at most about 19 % over it); `None` with nothing recorded.
    pub p99_ms: Option<f64>,
}

impl Window {
    /// A window of `span` each half, starting at `now_ms`.
    pub fn new(span: Duration, now_ms: i64) -> Self {
        Self {
            span_ms: (span.as_millis() as i64).max(1),
            halves: Default::default(),
            current: 0,
            started_ms: now_ms,
        }
    }

    /// Records one request that took `latency` and failed or not.
    pub fn record(&mut self, now_ms: i64, latency: Duration, failed: bool) {
        self.turn(now_ms);
        self.count(latency, failed);
    }

    /// Records one request of the pass `pass`, unless that pass was recorded in the current
    /// half already.
    pub fn record_once(&mut self, now_ms: i64, pass: u64, latency: Duration, failed: bool) {
        self.turn(now_ms);
        if self.halves[self.current].passes.insert(pass) {
            self.count(latency, failed);
        }
    }

    fn count(&mut self, latency: Duration, failed: bool) {
        let half = &mut self.halves[self.current];
        half.buckets[bucket(latency)] += 1;
        half.count += 1;
        half.errors += u64::from(failed);
    }

    /// What the window holds at `now_ms`.
    pub fn read(&mut self, now_ms: i64) -> Reading {
        self.turn(now_ms);
        let count: u64 = self.halves.iter().map(|h| h.count).sum();
        let errors: u64 = self.halves.iter().map(|h| h.errors).sum();
        if count == 0 {
            return Reading {
                count,
                error_share: None,
                p99_ms: None,
            };
        }
        // The smallest bucket below which at least 99 % of the requests fall.
        let wanted = count - count / 100;
        let mut seen = 0u64;
        let p99 = (0..BUCKETS)
            .find(|&i| {
                seen += self
                    .halves
                    .iter()
                    .map(|h| u64::from(h.buckets[i]))
                    .sum::<u64>();
                seen >= wanted
            })
            .unwrap_or(BUCKETS - 1);
        Reading {
            count,
            error_share: Some(errors as f64 / count as f64),
            p99_ms: Some(bound_us(p99) / 1_000.0),
        }
    }

    /// Moves on to a fresh half once a span has passed (both, after two).
    fn turn(&mut self, now_ms: i64) {
        let elapsed = now_ms - self.started_ms;
        if elapsed < self.span_ms {
            return;
        }
        self.current = 1 - self.current;
        self.halves[self.current] = Half::default();
        if elapsed >= 2 * self.span_ms {
            self.halves[1 - self.current] = Half::default();
        }
        self.started_ms = now_ms;
    }
}

/// The bucket of a latency.
fn bucket(latency: Duration) -> usize {
    let us = latency.as_secs_f64() * 1e6;
    if us <= FIRST_BOUND_US {
        return 0;
    }
    let i = ((us / FIRST_BOUND_US).log2() * PER_DOUBLING).ceil();
    (i as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `i`, in microseconds.
fn bound_us(i: usize) -> f64 {
    FIRST_BOUND_US * (i as f64 / PER_DOUBLING).exp2()
}

/// A window per sale, for a service that serves many: made at a sale's first record (the caller
/// records only for a sale it verified, so a stranger cannot grow it) and kept, reading empty,
/// until `idle` has passed since its last record: a sale whose traffic stopped still reports
/// that it has none (no traffic is no strain, and the autopilot may climb back on it).
#[derive(Debug)]
pub struct SaleWindows {
    span: Duration,
    idle_ms: i64,
    /// Each sale's window and when it last recorded.
    windows: Mutex<HashMap<String, (Window, i64)>>,
}

impl SaleWindows {
    pub fn new(span: Duration, idle: Duration) -> Self {
        Self {
            span,
            idle_ms: idle.as_millis() as i64,
            windows: Mutex::default(),
        }
    }

    /// Records one request of `sale` at `now_ms`, made with the pass whose key is `pass`: each
    /// pass counts once per half (module doc).
    pub fn record(&self, sale: &str, pass: u64, now_ms: i64, latency: Duration, failed: bool) {
        let mut windows = self.windows.lock().expect("lock");
        let (window, last) = match windows.get_mut(sale) {
            Some(entry) => entry,
            None => windows
                .entry(sale.to_owned())
                .or_insert_with(|| (Window::new(self.span, now_ms), now_ms)),
        };
        window.record_once(now_ms, pass, latency, failed);
        *last = now_ms;
    }

    /// Every sale's reading at `now_ms` (an empty one for a sale idle for less than `idle`);
    /// the windows idle for longer are dropped.
    pub fn readings(&self, now_ms: i64) -> Vec<(String, Reading)> {
        let mut windows = self.windows.lock().expect("lock");
        let mut readings = Vec::with_capacity(windows.len());
        windows.retain(|sale, (window, last)| {
            let reading = window.read(now_ms);
            if reading.count == 0 && now_ms - *last > self.idle_ms {
                return false;
            }
            readings.push((sale.clone(), reading));
            true
        });
        readings
    }

    /// How many sales have a window now.
    pub fn len(&self) -> usize {
        self.windows.lock().expect("lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAN: Duration = Duration::from_secs(5);

    #[test]
    fn a_bucket_is_its_width_wider_than_the_one_before() {
        assert!((BUCKET_WIDTH - (1.0 / PER_DOUBLING).exp2()).abs() < 1e-12);
        assert!((bound_us(9) / bound_us(8) - BUCKET_WIDTH).abs() < 1e-9);
    }

    #[test]
    fn the_p99_is_never_under_the_truth_nor_a_bucket_over_it() {
        let mut window = Window::new(SPAN, 0);
        for ms in 1..=1_000u64 {
            window.record(0, Duration::from_millis(ms), ms % 50 == 0);
        }
        let reading = window.read(0);
        assert_eq!(reading.count, 1_000);
        assert_eq!(reading.error_share, Some(0.02));
        let p99 = reading.p99_ms.unwrap();
        assert!((990.0..=990.0 * 1.19).contains(&p99), "{p99}");
    }

    #[test]
    fn a_slow_tail_shows_and_everything_slower_than_the_last_bucket_counts_there() {
        let mut window = Window::new(SPAN, 0);
        for _ in 0..95 {
            window.record(0, Duration::from_millis(2), false);
        }
        for _ in 0..5 {
            window.record(0, Duration::from_secs(60), true);
        }
        let p99 = window.read(0).p99_ms.unwrap();
        assert!(p99 >= 6_000.0, "{p99}");
        assert_eq!(bucket(Duration::from_secs(3_600)), BUCKETS - 1);
        assert_eq!(bucket(Duration::ZERO), 0);
    }

    #[test]
    fn the_window_forgets_what_is_older_than_two_spans() {
        let mut window = Window::new(SPAN, 0);
        window.record(0, Duration::from_millis(900), true);
        // One span later the old half still counts: a reading covers one to two spans.
        window.record(5_000, Duration::from_millis(1), false);
        assert_eq!(window.read(6_000).count, 2);
        // Another span on, the first request is gone.
        assert_eq!(window.read(10_000).count, 1);
        assert_eq!(window.read(10_000).error_share, Some(0.0));
        // And after two quiet spans nothing is left.
        let empty = window.read(30_000);
        assert_eq!(
            (empty.count, empty.p99_ms, empty.error_share),
            (0, None, None)
        );
    }

    #[test]
    fn a_pass_counts_once_per_half_however_often_it_asks() {
        let windows = SaleWindows::new(SPAN, SPAN);
        // One pass replayed a thousand times, slowly and failing; ten people, fast and well.
        for _ in 0..1_000 {
            windows.record("s", 7, 0, Duration::from_secs(2), true);
        }
        for pass in 100..110 {
            windows.record("s", pass, 0, Duration::from_millis(3), false);
        }
        let (_, reading) = windows.readings(0).pop().unwrap();
        assert_eq!(reading.count, 11);
        assert_eq!(reading.error_share, Some(1.0 / 11.0));
        // The next half counts it again, once.
        windows.record("s", 7, 5_000, Duration::from_secs(2), true);
        windows.record("s", 7, 5_001, Duration::from_secs(2), true);
        assert_eq!(windows.readings(5_002).pop().unwrap().1.count, 12);
    }
}
