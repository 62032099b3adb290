//! What a strain must prove before the autopilot cuts for it (`health::proven`): a latency
//! past its target by its histogram bucket's bottom, an error share by one failure more than
//! it counts.

use super::tests::{calm, SECOND};
use super::*;

/// A latency read as its bucket's top within a bucket of its target may be under the target:
/// no cut on it (the bench's calm and hostile runs alike were cut for a script p99 read as
/// 51.2 ms against 50). A bucket wholly above the target is strain, cut by what was measured.
#[test]
fn a_latency_within_a_bucket_of_its_target_is_not_cut_for() {
    let mut pilot = Autopilot::new(Settings::new(1.0, 100.0), 100.0);
    let close = Health {
        script_p99_ms: Some(51.2),
        ..calm(0)
    };
    assert_eq!(
        pilot.step(0, Some(&close)),
        Decision::Held {
            rate: 100.0,
            why: Hold::WithinBand
        }
    );
    let over = Health {
        script_p99_ms: Some(60.887),
        ..calm(SECOND)
    };
    match pilot.step(SECOND, Some(&over)) {
        Decision::Cut {
            signal, pressure, ..
        } => {
            assert_eq!(signal, Signal::ScriptLatency);
            assert!((pressure - 60.887 / 50.0).abs() < 1e-9, "{pressure}");
        }
        other => panic!("{other:?}"),
    }
}

/// One failure proves nothing: one in 20 requests reads as 5 % (five times the target) and is
/// held; three in 20 are strain, and the cut is by what was measured.
#[test]
fn one_failure_alone_is_not_cut_for() {
    let mut pilot = Autopilot::new(Settings::new(1.0, 100.0), 100.0);
    let failing = |at_ms, failures: f64| Health {
        requests: 20,
        error_share: Some(failures / 20.0),
        ..calm(at_ms)
    };
    assert_eq!(
        pilot.step(0, Some(&failing(0, 1.0))),
        Decision::Held {
            rate: 100.0,
            why: Hold::WithinBand
        }
    );
    match pilot.step(SECOND, Some(&failing(SECOND, 3.0))) {
        Decision::Cut {
            signal, pressure, ..
        } => {
            assert_eq!(signal, Signal::Errors);
            assert!((pressure - 15.0).abs() < 1e-9, "{pressure}");
        }
        other => panic!("{other:?}"),
    }
}
