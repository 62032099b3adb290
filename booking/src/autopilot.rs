//! The admission autopilot as ops sees it: the `autopilot` of `PATCH /admin/v1/sales/{sale}`
//! (on with its bounds, or off), read and checked field by field; and the task that writes the
//! leader's notable rate changes into the audit trail ([`drain`]): the gateway that decides them
//! has no database, so it queues them in the sale's slot and this service writes them, in
//! order, each once.

use floodgate_platform::autopilot::{Settings, Targets};
use floodgate_protocol::api::code;
use floodgate_protocol::settings::check_admission_rate;

use crate::error::ApiError;

mod drain;

pub use drain::drain;

/// The `autopilot` of `PATCH /admin/v1/sales/{sale}`: on, with a floor and a ceiling for the
/// admission rate (and, if the defaults do not suit the sale, its pace and targets), or off.
/// Turning it on takes over from the rate as it stands (within the bounds); off leaves the rate
/// where the autopilot left it. Setting `admission_rate` by hand turns it off in the same
/// change, unless the same request turns it on.
#[derive(Debug, Default, PartialEq, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": true, "floor": 5.0, "ceiling": 50.0, "settle_secs": 10}))]
pub struct AutopilotUpdate {
    pub enabled: bool,
    /// Admissions a second it never goes below (required to turn it on).
    #[schema(nullable = false, minimum = 0.001, maximum = 1_000_000.0)]
    pub floor: Option<f64>,
    /// Admissions a second it never goes above (required to turn it on).
    #[schema(nullable = false, minimum = 0.001, maximum = 1_000_000.0)]
    pub ceiling: Option<f64>,
    /// How long a change of rate takes to show: the time the sale's buyers take from admission
    /// to reserving, plus the services' health window (5 to 10 s). Changes are at least this
    /// far apart, unless the strain grows. 10 by default.
    #[schema(nullable = false, minimum = 1, maximum = 300)]
    pub settle_secs: Option<u32>,
    /// The level of each signal past which the backend counts as strained (those left out keep
    /// their defaults).
    #[schema(nullable = false)]
    pub targets: Option<TargetsUpdate>,
}

/// Targets to change: each a level past which the backend counts as strained.
#[derive(Debug, Default, PartialEq, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetsUpdate {
    /// The reservation endpoint's p99, ms (default 500).
    #[schema(nullable = false)]
    pub reservation_p99_ms: Option<f64>,
    /// The share of reservations answered 503 or 5xx, above 0 and at most 1 (default 0.01).
    #[schema(nullable = false)]
    pub error_share: Option<f64>,
    /// The pool scripts' p99, ms (default 50).
    #[schema(nullable = false)]
    pub script_p99_ms: Option<f64>,
    /// The broker's p99 acknowledgement time, ms (default 500).
    #[schema(nullable = false)]
    pub produce_p99_ms: Option<f64>,
    /// Events not yet applied to PostgreSQL (default 50,000).
    #[schema(nullable = false)]
    pub consumer_lag: Option<u64>,
}

/// The longest latency target: ten minutes is no longer a target.
const LONGEST_MS: f64 = 600_000.0;

impl AutopilotUpdate {
    /// Reads the field's value, so that each mistake is named (`invalid_autopilot`).
    pub fn read(value: &serde_json::Value) -> Result<Self, ApiError> {
        let update: Self = serde_json::from_value(value.clone())
            .map_err(|e| invalid(format!("autopilot: {e}")))?;
        update.settings()?;
        Ok(update)
    }

    /// The settings it turns the autopilot on with, or `None` to turn it off.
    pub fn settings(&self) -> Result<Option<Settings>, ApiError> {
        if !self.enabled {
            if *self != (Self::default()) {
                return Err(invalid(
                    "to turn the autopilot off, send {\"enabled\": false} alone".into(),
                ));
            }
            return Ok(None);
        }
        let bound = |name: &str, value: Option<f64>| {
            let value = value.ok_or_else(|| {
                invalid(format!(
                    "autopilot.{name} is needed to turn the autopilot on"
                ))
            })?;
            check_admission_rate(value).map_err(|m| invalid(format!("autopilot.{name}: {m}")))
        };
        let (floor, ceiling) = (bound("floor", self.floor)?, bound("ceiling", self.ceiling)?);
        if floor > ceiling {
            return Err(invalid(format!(
                "autopilot.floor ({floor}) is above its ceiling ({ceiling})"
            )));
        }
        let settle_secs = self.settle_secs.unwrap_or(10);
        if !(1..=300).contains(&settle_secs) {
            return Err(invalid(
                "autopilot.settle_secs must be from 1 to 300 seconds".into(),
            ));
        }
        let targets = match &self.targets {
            Some(t) => t.targets()?,
            None => Targets::default(),
        };
        Ok(Some(
            Settings::new(floor, ceiling)
                .with_settle(i64::from(settle_secs) * 1_000)
                .with_targets(targets),
        ))
    }
}

impl TargetsUpdate {
    /// The defaults with these changes, each checked.
    fn targets(&self) -> Result<Targets, ApiError> {
        let mut targets = Targets::default();
        let ms = |name: &str, value: Option<f64>, into: &mut f64| {
            if let Some(v) = value {
                if !(v.is_finite() && v > 0.0 && v <= LONGEST_MS) {
                    return Err(invalid(format!(
                        "autopilot.targets.{name} must be above 0 and at most {LONGEST_MS} ms"
                    )));
                }
                *into = v;
            }
            Ok(())
        };
        ms(
            "reservation_p99_ms",
            self.reservation_p99_ms,
            &mut targets.reservation_p99_ms,
        )?;
        ms(
            "script_p99_ms",
            self.script_p99_ms,
            &mut targets.script_p99_ms,
        )?;
        ms(
            "produce_p99_ms",
            self.produce_p99_ms,
            &mut targets.produce_p99_ms,
        )?;
        if let Some(share) = self.error_share {
            if !(share.is_finite() && share > 0.0 && share <= 1.0) {
                return Err(invalid(
                    "autopilot.targets.error_share must be above 0 and at most 1".into(),
                ));
            }
            targets.error_share = share;
        }
        if let Some(lag) = self.consumer_lag {
            if lag == 0 {
                return Err(invalid(
                    "autopilot.targets.consumer_lag must be at least 1 event".into(),
                ));
            }
            targets.consumer_lag = lag;
        }
        Ok(targets)
    }
}

fn invalid(message: String) -> ApiError {
    ApiError::new(code::INVALID_AUTOPILOT, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: serde_json::Value) -> Result<Option<Settings>, String> {
        AutopilotUpdate::read(&value)
            .and_then(|u| u.settings())
            .map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn on_needs_its_bounds_in_order_and_off_is_alone() {
        let on = read(
            json!({"enabled": true, "floor": 2.0, "ceiling": 20.0, "settle_secs": 3,
            "targets": {"script_p99_ms": 80.0, "consumer_lag": 9}}),
        )
        .unwrap()
        .unwrap();
        assert_eq!((on.floor, on.ceiling, on.settle_ms), (2.0, 20.0, 3_000));
        assert_eq!(on.targets.script_p99_ms, 80.0);
        assert_eq!(on.targets.consumer_lag, 9);
        assert_eq!(
            on.targets.reservation_p99_ms,
            Targets::default().reservation_p99_ms
        );
        assert_eq!(read(json!({"enabled": false})), Ok(None));
        for bad in [
            json!({"enabled": true, "floor": 2.0}),
            json!({"enabled": true, "floor": 30.0, "ceiling": 20.0}),
            json!({"enabled": true, "floor": 0.0, "ceiling": 20.0}),
            json!({"enabled": true, "floor": 1.0, "ceiling": 20.0, "settle_secs": 0}),
            json!({"enabled": true, "floor": 1.0, "ceiling": 2.0, "targets": {"error_share": 2.0}}),
            json!({"enabled": true, "floor": 1.0, "ceiling": 2.0, "targets": {"script_p99_ms": -1.0}}),
            json!({"enabled": true, "floor": 1.0, "ceiling": 2.0, "targets": {"nope": 1}}),
            json!({"enabled": false, "floor": 1.0}),
            json!({"floor": 1.0}),
            json!("on"),
        ] {
            let refused = read(bad.clone()).unwrap_err();
            assert!(refused.contains("invalid_autopilot"), "{bad}: {refused}");
        }
    }
}
