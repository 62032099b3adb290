//! The admission autopilot: a sale's admission rate moved by the health of what admitted people
//! hit, in a closed loop. Pure logic, with no clock or I/O of its own: the admission leader's
//! tick hands it the latest [`Health`] summary and applies the rate it answers, and the sale
//! simulator runs the same code on its virtual clock.
//!
//! The loop's hard part is its delay. A person admitted now reserves seconds later (they look,
//! pick a class, type), so a cut shows in the signals only that much later, and a controller
//! that cuts until the signals recover cuts far too deep, then climbs past the limit again: it
//! oscillates. Hence:
//! - a cut is proportional to how far the worst signal is past its target (a gradient), at most a
//!   halving, and the next cut waits until the previous one can have shown
//!   ([`Settings::settle_ms`]) unless the strain grew meanwhile;
//! - a raise comes only once the signals have been calm for a whole settle since the last
//!   change, and is additive (a probe); near the rate where strain was last seen it is a quarter
//!   of a probe, so a flapping fault bounds the swing;
//! - signals that are missing or stale hold the rate: no raise on no evidence, no cut on none
//!   (the consumers' lag travels apart and may go stale alone: then the rest may still cut);
//! - recovery needs no completed work: a fresh summary with too few requests to judge a latency
//!   by counts as calm, so a rate cut to the floor climbs back by probes even if nothing is
//!   booked meanwhile (the failure of limiters that learn only from completed requests);
//! - the rate stays within the floor and the ceiling ops set; the stock and the cap on active
//!   users still bound admission after it, as they bound a hand-set rate.

use serde::{Deserialize, Serialize};

mod health;
#[cfg(test)]
mod proven_tests;
#[cfg(test)]
mod tests;
pub mod window;

use health::worst;
pub use health::{merge, Health, Signal, Targets, MIN_REQUESTS};

/// The autopilot's settings: ops's bounds and the loop's pace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Settings {
    /// Admissions a second the autopilot never goes below.
    pub floor: f64,
    /// Admissions a second it never goes above.
    pub ceiling: f64,
    pub targets: Targets,
    /// How long a change of rate takes to show in the signals: the time admitted people take to
    /// reserve, plus the summaries' window. Changes are at least this far apart (a worsening
    /// strain aside).
    pub settle_ms: i64,
    /// A summary older than this holds the rate.
    pub stale_ms: i64,
    /// Below this share of every target the backend is calm, and the rate may rise; between it
    /// and the target the rate holds (the band that keeps the loop from chattering).
    pub calm_below: f64,
    /// A raise, in admissions a second.
    pub probe: f64,
}

impl Settings {
    /// Settings for ops's floor and ceiling: a probe of a twentieth of the span, a settle of
    /// 10 s (a person's think time before booking, and a summary's window).
    pub fn new(floor: f64, ceiling: f64) -> Self {
        Self {
            floor,
            ceiling,
            targets: Targets::default(),
            settle_ms: 10_000,
            stale_ms: 5_000,
            calm_below: 0.7,
            probe: ((ceiling - floor) / 20.0).max(f64::MIN_POSITIVE),
        }
    }

    /// These settings with a settle of `settle_ms`: the time a sale's buyers take from admission
    /// to reserving, plus a summary's window.
    pub fn with_settle(mut self, settle_ms: i64) -> Self {
        self.settle_ms = settle_ms.max(1);
        self
    }

    /// These settings judged against `targets`.
    pub fn with_targets(mut self, targets: Targets) -> Self {
        self.targets = targets;
        self
    }
}

/// What the admission leader keeps of its latest step (`{s:<sale>}:autopilot`), for the console
/// and the figures: when, which gateway led, what it decided and the health it judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Step {
    pub at_ms: i64,
    pub leader: String,
    pub decision: Decision,
    /// The services' health merged as the step judged it (`None`: nothing fresh).
    pub health: Option<Health>,
    /// What the autopilot remembered after it: a next leader goes on from it.
    #[serde(default)]
    pub memory: Memory,
}

/// A notable change of rate ([`notable`]) as the audit trail records it: the rate last audited
/// (`from`), the rate now (`to`), and the step that made it; `id` names it once and for all (the
/// leader's fencing token and the step's time), so whoever writes it writes it once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Audited {
    pub id: String,
    pub from: f64,
    pub to: f64,
    #[serde(flatten)]
    pub step: Step,
}

/// What the autopilot did this step, and why: what the console shows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Decision {
    /// Cut: `signal` was `pressure` times its target.
    Cut {
        from: f64,
        to: f64,
        signal: Signal,
        pressure: f64,
    },
    /// Raised by a probe: every signal calm.
    Raised { from: f64, to: f64 },
    /// Held at `rate`, for `why`.
    Held { rate: f64, why: Hold },
}

impl Decision {
    /// The rate after this step.
    pub fn rate(&self) -> f64 {
        match *self {
            Decision::Cut { to, .. } | Decision::Raised { to, .. } => to,
            Decision::Held { rate, .. } => rate,
        }
    }
}

/// Why the rate held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Hold {
    /// No summary, or one older than [`Settings::stale_ms`]; or calm, but without a fresh
    /// consumer lag (no raise on missing evidence).
    Stale,
    /// The last change cannot have shown yet.
    Settling,
    /// Strained, but already at the floor.
    AtFloor,
    /// Calm, and already at the ceiling.
    AtCeiling,
    /// Between calm and strained.
    WithinBand,
}

/// One sale's autopilot: its settings and what it remembers between steps.
#[derive(Clone, Debug)]
pub struct Autopilot {
    settings: Settings,
    rate: f64,
    memory: Memory,
}

/// What an autopilot remembers between steps, kept with each step (`Step::memory`) so that a new
/// leader goes on where the last one stopped: a cut a moment ago still settles, and a probe near
/// the rate that strained the backend is still a careful one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Memory {
    /// When the rate last changed (Unix ms), and the pressure if it was a cut.
    pub changed_at_ms: Option<i64>,
    pub cut_pressure: Option<f64>,
    /// The rate at which strain was last seen, until a probe passes it calmly.
    pub strained_at: Option<f64>,
}

impl Autopilot {
    /// An autopilot taking over a sale admitting at `rate`.
    pub fn new(settings: Settings, rate: f64) -> Self {
        Self::resume(settings, rate, Memory::default())
    }

    /// An autopilot going on from `memory` (the last leader's) at `rate`.
    pub fn resume(settings: Settings, rate: f64, memory: Memory) -> Self {
        let rate = rate.clamp(settings.floor, settings.ceiling);
        Self {
            settings,
            rate,
            memory,
        }
    }

    /// What it remembers now.
    pub fn memory(&self) -> Memory {
        self.memory
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// New settings from ops (a new floor or ceiling applies at the next step).
    pub fn set(&mut self, settings: Settings) {
        self.settings = settings;
    }

    /// One step at `now_ms` with the latest summary.
    pub fn step(&mut self, now_ms: i64, health: Option<&Health>) -> Decision {
        let s = self.settings.clone();
        let bounded = self.rate.clamp(s.floor, s.ceiling);
        if bounded != self.rate {
            // Ops moved a bound past the rate: follow it at once.
            self.rate = bounded;
        }
        let Some(health) = health.filter(|h| now_ms - h.at_ms <= s.stale_ms) else {
            return self.hold(Hold::Stale);
        };
        // The lag travels apart from the rest (the consumers measure it): stale, it is not
        // judged, and the rate may still be cut on the rest but not raised.
        let lag = health.fresh_lag(now_ms, s.stale_ms);
        let judged = Health {
            consumer_lag: lag,
            ..health.clone()
        };
        let settled = self
            .memory
            .changed_at_ms
            .is_none_or(|at| now_ms - at >= s.settle_ms);
        match worst(&judged, &s.targets) {
            Some((_, pressure)) if (s.calm_below..=1.0).contains(&pressure) => {
                self.hold(Hold::WithinBand)
            }
            Some((signal, pressure)) if pressure > 1.0 => {
                // Past the target as measured, but within a bucket of it: the strain may be the
                // measurement's (`health::proven`). A cut needs it proven; its size is still
                // what was measured.
                if health::proven(&judged, &s.targets).is_none_or(|(_, proven)| proven <= 1.0) {
                    return self.hold(Hold::WithinBand);
                }
                // A cut may follow a cut within the settle only if the strain grew by a quarter.
                let worse = self
                    .memory
                    .cut_pressure
                    .is_some_and(|previous| pressure > previous * 1.25);
                if !settled && !worse {
                    return self.hold(Hold::Settling);
                }
                let to = (self.rate * (1.0 / pressure).clamp(0.5, 0.9)).max(s.floor);
                if to >= self.rate {
                    return self.hold(Hold::AtFloor);
                }
                let from = self.rate;
                self.memory.strained_at = Some(from);
                self.change(now_ms, to, Some(pressure));
                Decision::Cut {
                    from,
                    to,
                    signal,
                    pressure,
                }
            }
            // Calm, or nothing to judge by (no traffic is no strain).
            _ => {
                if lag.is_none() {
                    // No fresh word from the consumers: no raise on missing evidence.
                    return self.hold(Hold::Stale);
                }
                if !settled {
                    return self.hold(Hold::Settling);
                }
                if self.rate >= s.ceiling {
                    return self.hold(Hold::AtCeiling);
                }
                // Near the rate that strained the backend last time, a quarter of a probe.
                let careful = self
                    .memory
                    .strained_at
                    .is_some_and(|r| self.rate + s.probe > r * 0.9);
                let step = if careful { s.probe / 4.0 } else { s.probe };
                let (from, to) = (self.rate, (self.rate + step).min(s.ceiling));
                if self.memory.strained_at.is_some_and(|r| to > r) {
                    // Past it calmly: whatever strained the backend there has gone.
                    self.memory.strained_at = None;
                }
                self.change(now_ms, to, None);
                Decision::Raised { from, to }
            }
        }
    }

    fn hold(&self, why: Hold) -> Decision {
        Decision::Held {
            rate: self.rate,
            why,
        }
    }

    fn change(&mut self, now_ms: i64, to: f64, cut: Option<f64>) {
        self.rate = to;
        self.memory.changed_at_ms = Some(now_ms);
        self.memory.cut_pressure = cut;
    }
}

/// Whether a change from `from` to `to` is large enough to audit: more than a fifth either way
/// from the rate last audited. The audit records a trend, never one row a tick.
pub fn notable(from: f64, to: f64) -> bool {
    (to - from).abs() > from.abs() * 0.2
}
