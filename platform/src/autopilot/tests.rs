//! The autopilot's behaviour, step by step on a virtual clock.

use super::health::worst;
use super::*;

pub(super) const SECOND: i64 = 1_000;

pub(super) fn calm(at_ms: i64) -> Health {
    Health {
        at_ms,
        requests: 1_000,
        reservation_p99_ms: Some(100.0),
        error_share: Some(0.0),
        script_p99_ms: Some(5.0),
        produce_p99_ms: Some(50.0),
        consumer_lag: Some(10),
        consumer_lag_at_ms: None,
    }
}

fn strained(at_ms: i64, p99_ms: f64) -> Health {
    Health {
        reservation_p99_ms: Some(p99_ms),
        ..calm(at_ms)
    }
}

/// Runs `autopilot` a tick a second from `from` for `secs`, with the health `at` gives.
fn run(
    autopilot: &mut Autopilot,
    from: i64,
    secs: i64,
    at: impl Fn(i64) -> Option<Health>,
) -> Vec<Decision> {
    (0..secs)
        .map(|i| {
            let now = from + i * SECOND;
            autopilot.step(now, at(now).as_ref())
        })
        .collect()
}

#[test]
fn strain_cuts_within_a_tick_in_proportion_and_never_below_the_floor() {
    let mut pilot = Autopilot::new(Settings::new(10.0, 1_000.0), 1_000.0);
    // Twice the latency target: the rate halves at once.
    let first = pilot.step(0, Some(&strained(0, 1_000.0)));
    assert_eq!(
        first,
        Decision::Cut {
            from: 1_000.0,
            to: 500.0,
            signal: Signal::ReservationLatency,
            pressure: 2.0
        }
    );
    // A strain that lasts cuts again once each settle, down to the floor and no further.
    let decisions = run(&mut pilot, SECOND, 120, |now| Some(strained(now, 5_000.0)));
    assert!(decisions.iter().all(|d| d.rate() >= 10.0));
    assert_eq!(pilot.rate(), 10.0);
    assert!(matches!(
        decisions.last(),
        Some(Decision::Held {
            why: Hold::AtFloor,
            ..
        })
    ));
}

#[test]
fn a_cut_waits_for_the_last_to_show_unless_the_strain_grew() {
    let mut pilot = Autopilot::new(Settings::new(1.0, 100.0), 100.0);
    assert!(matches!(
        pilot.step(0, Some(&strained(0, 600.0))),
        Decision::Cut { .. }
    ));
    // The same strain a second later: the cut cannot have shown yet.
    assert_eq!(
        pilot.step(SECOND, Some(&strained(SECOND, 600.0))),
        Decision::Held {
            rate: pilot.rate(),
            why: Hold::Settling
        }
    );
    // A strain grown past a quarter more is cut at once.
    assert!(matches!(
        pilot.step(2 * SECOND, Some(&strained(2 * SECOND, 1_500.0))),
        Decision::Cut { .. }
    ));
}

#[test]
fn missing_or_stale_signals_hold_the_rate() {
    let mut pilot = Autopilot::new(Settings::new(1.0, 100.0), 40.0);
    assert_eq!(
        pilot.step(0, None),
        Decision::Held {
            rate: 40.0,
            why: Hold::Stale
        }
    );
    // A strained summary, but from 6 s ago (stale after 5 s): no cut on old news.
    assert_eq!(
        pilot.step(6 * SECOND, Some(&strained(0, 10_000.0))),
        Decision::Held {
            rate: 40.0,
            why: Hold::Stale
        }
    );
    // Nor a raise on a calm one.
    assert_eq!(pilot.step(6 * SECOND, Some(&calm(0))).rate(), 40.0);
}

#[test]
fn a_stale_lag_alone_forbids_a_raise_but_not_a_cut() {
    let mut pilot = Autopilot::new(Settings::new(1.0, 100.0), 40.0);
    let now = 20 * SECOND;
    let old_lag = |h: Health| Health {
        consumer_lag: Some(999_999),
        consumer_lag_at_ms: Some(now - 6 * SECOND),
        ..h
    };
    // Calm, but the consumers have not said how far behind they are lately: hold.
    assert_eq!(
        pilot.step(now, Some(&old_lag(calm(now)))),
        Decision::Held {
            rate: 40.0,
            why: Hold::Stale
        }
    );
    // The stale lag (far past its target) is not judged; the fresh latency still cuts.
    match pilot.step(now, Some(&old_lag(strained(now, 1_000.0)))) {
        Decision::Cut { signal, .. } => assert_eq!(signal, Signal::ReservationLatency),
        other => panic!("{other:?}"),
    }
    // And with a fresh lag, a calm backend lets it climb again.
    let fresh = Health {
        consumer_lag_at_ms: Some(now + 30 * SECOND),
        ..calm(now + 30 * SECOND)
    };
    assert!(matches!(
        pilot.step(now + 30 * SECOND, Some(&fresh)),
        Decision::Raised { .. }
    ));
}

#[test]
fn calm_climbs_back_to_the_ceiling_by_probes_and_stops_there() {
    let mut pilot = Autopilot::new(Settings::new(10.0, 210.0), 10.0);
    let decisions = run(&mut pilot, 0, 600, |now| Some(calm(now)));
    assert_eq!(pilot.rate(), 210.0);
    // A probe is a twentieth of the span, one each settle: 20 raises, never more than one
    // in 10 s, and then it holds.
    let raises: Vec<_> = decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| matches!(d, Decision::Raised { .. }))
        .collect();
    assert_eq!(raises.len(), 20);
    assert!(raises.windows(2).all(|w| w[1].0 - w[0].0 >= 10));
    assert!(decisions.iter().all(|d| d.rate() <= 210.0));
    assert!(matches!(
        decisions.last(),
        Some(Decision::Held {
            why: Hold::AtCeiling,
            ..
        })
    ));
}

#[test]
fn no_traffic_is_no_strain_so_a_cut_rate_recovers_without_completed_work() {
    let mut pilot = Autopilot::new(Settings::new(10.0, 100.0), 100.0);
    pilot.step(0, Some(&strained(0, 5_000.0)));
    assert!(pilot.rate() < 100.0);
    // Nothing is booked (nobody admitted reserves yet): a latency from 3 requests is not
    // judged, and the rate climbs anyway.
    let quiet = |now| {
        Some(Health {
            requests: 3,
            reservation_p99_ms: Some(9_000.0),
            ..calm(now)
        })
    };
    run(&mut pilot, SECOND, 600, quiet);
    assert_eq!(pilot.rate(), 100.0);
}

#[test]
fn within_the_band_the_rate_holds() {
    let mut pilot = Autopilot::new(Settings::new(1.0, 100.0), 50.0);
    // 80 % of the latency target: neither strained nor calm.
    let decisions = run(&mut pilot, 0, 60, |now| Some(strained(now, 400.0)));
    assert!(decisions.iter().all(|d| *d
        == Decision::Held {
            rate: 50.0,
            why: Hold::WithinBand
        }));
}

#[test]
fn a_flapping_fault_keeps_the_swing_bounded() {
    // Strained for 30 s, calm for 30 s, for an hour: the rate must not swing ever wider,
    // nor climb back to the rate that strained it faster than a quarter-probe at a time.
    let mut pilot = Autopilot::new(Settings::new(10.0, 1_000.0), 1_000.0);
    let decisions = run(&mut pilot, 0, 3_600, |now| {
        if (now / (30 * SECOND)) % 2 == 0 {
            Some(strained(now, 1_000.0))
        } else {
            Some(calm(now))
        }
    });
    let rates: Vec<f64> = decisions.iter().map(Decision::rate).collect();
    let late = &rates[600..];
    let (low, high) = late
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    assert!(low >= 10.0 && high <= 1_000.0);
    // After the first minutes the rate stays low (each strain halves it, each calm spell adds
    // at most a few probes), far from the ceiling it started at.
    assert!(high < 300.0, "swing {low}..{high}");
    // Changes are paced: never two raises within a settle.
    let raised_at: Vec<usize> = decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| matches!(d, Decision::Raised { .. }))
        .map(|(i, _)| i)
        .collect();
    assert!(raised_at.windows(2).all(|w| w[1] - w[0] >= 10));
}

#[test]
fn the_worst_signal_leads_and_bad_numbers_are_ignored() {
    let health = Health {
        consumer_lag: Some(150_000),
        script_p99_ms: Some(f64::NAN),
        ..calm(0)
    };
    assert_eq!(
        worst(&health, &Targets::default()),
        Some((Signal::ConsumerLag, 3.0))
    );
    assert_eq!(worst(&Health::default(), &Targets::default()), None);
}

#[test]
fn ops_moving_a_bound_moves_the_rate_at_once() {
    let mut pilot = Autopilot::new(Settings::new(10.0, 100.0), 100.0);
    pilot.set(Settings::new(10.0, 40.0));
    assert_eq!(pilot.step(0, None).rate(), 40.0);
    pilot.set(Settings::new(60.0, 100.0));
    assert_eq!(pilot.step(SECOND, None).rate(), 60.0);
}

#[test]
fn only_a_change_of_more_than_a_fifth_is_audited() {
    assert!(!notable(100.0, 119.0));
    assert!(notable(100.0, 121.0));
    assert!(notable(100.0, 79.0));
}

#[test]
fn instances_merge_into_the_worst_case_and_stale_ones_are_left_out() {
    let a = Health {
        at_ms: 9_000,
        requests: 300,
        reservation_p99_ms: Some(120.0),
        error_share: Some(0.0),
        ..Health::default()
    };
    let b = Health {
        at_ms: 9_500,
        requests: 100,
        reservation_p99_ms: Some(480.0),
        error_share: Some(0.04),
        consumer_lag: Some(7),
        ..Health::default()
    };
    // Too few requests to judge a latency by: its slow p99 does not lead while others can.
    let small = Health {
        at_ms: 9_800,
        requests: 3,
        reservation_p99_ms: Some(9_000.0),
        error_share: Some(0.0),
        ..Health::default()
    };
    let gone = Health {
        at_ms: 1_000,
        requests: 1_000,
        reservation_p99_ms: Some(60_000.0),
        error_share: Some(1.0),
        ..Health::default()
    };
    let merged = merge(&[a, b, small, gone.clone()], 10_000, 5_000).unwrap();
    assert_eq!(merged.at_ms, 9_000);
    assert_eq!(merged.requests, 403);
    assert_eq!(merged.reservation_p99_ms, Some(480.0));
    assert_eq!(merged.error_share, Some(4.0 / 403.0));
    assert_eq!(merged.consumer_lag, Some(7));
    assert_eq!(merged.consumer_lag_at_ms, Some(9_500));
    assert_eq!(merged.script_p99_ms, None);
    // A lag measured too long ago is left out though its carrier is fresh.
    let old_lag = Health {
        at_ms: 9_900,
        consumer_lag: Some(50),
        consumer_lag_at_ms: Some(4_000),
        ..Health::default()
    };
    let merged = merge(&[old_lag], 10_000, 5_000).unwrap();
    assert_eq!(
        (merged.consumer_lag, merged.consumer_lag_at_ms),
        (None, None)
    );
    assert_eq!(merge(&[gone], 10_000, 5_000), None);
    assert_eq!(merge(&[], 10_000, 5_000), None);
}

#[test]
fn a_new_leader_goes_on_from_the_last_ones_memory() {
    let settings = Settings::new(10.0, 100.0);
    let mut old = Autopilot::new(settings.clone(), 100.0);
    assert!(matches!(
        old.step(0, Some(&strained(0, 1_000.0))),
        Decision::Cut { .. }
    ));
    let memory = old.memory();
    assert_eq!(memory.changed_at_ms, Some(0));
    assert_eq!(memory.strained_at, Some(100.0));
    // Two seconds later the lease moves. A fresh controller would raise at once on a calm
    // summary; one resumed from the memory still waits for the cut to show.
    let calm_now = calm(2 * SECOND);
    let mut fresh = Autopilot::new(settings.clone(), old.rate());
    assert!(matches!(
        fresh.step(2 * SECOND, Some(&calm_now)),
        Decision::Raised { .. }
    ));
    let mut resumed = Autopilot::resume(settings, old.rate(), memory);
    assert_eq!(
        resumed.step(2 * SECOND, Some(&calm_now)),
        Decision::Held {
            rate: 50.0,
            why: Hold::Settling
        }
    );
}
