//! The figures one benchmark run recorded, as the simulator reads them: from `deploy/bench.sh`'s
//! results folder (its JSON) or from a committed fixture of them (`loadgen/fixtures/`).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spread::Spread;
use crate::markdown::{self, cpu::Phase};

/// The calibration used when none is named: the later of the two benchmark runs committed
/// (their figures as `--show-calibration` prints them); the earlier checks the model.
pub const DEFAULT_RUN: &str = include_str!("../../fixtures/bench-b.json");
pub const OTHER_RUN: &str = include_str!("../../fixtures/bench-a.json");

/// The recorded run to calibrate on: a results folder, a JSON file of figures, or the default.
pub fn recorded(from: Option<&PathBuf>) -> anyhow::Result<Recorded> {
    match from {
        None => Ok(serde_json::from_str(DEFAULT_RUN)?),
        Some(dir) if dir.is_dir() => Recorded::from_results(dir),
        Some(file) => {
            let text = std::fs::read(file).with_context(|| format!("{}", file.display()))?;
            serde_json::from_slice(&text).with_context(|| format!("{}", file.display()))
        }
    }
}

/// One benchmark run's figures, as much of them as the simulator uses.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Recorded {
    /// Which run (its date and commit) and the machine it ran on.
    pub run: String,
    /// Every timed phase: its seconds, its counts, each role's CPU seconds.
    pub phases: BTreeMap<String, PhaseFigures>,
    /// Sessions held in line (the `queue` scenario), the gateways' memory per connection, the
    /// seconds opening them took, and one change's fan-out to all of them.
    pub queue: Option<QueueFigures>,
    pub burst: Option<BurstFigures>,
    /// The booking endpoint end to end, 50 requests in flight.
    pub booking: Option<BookingFigures>,
    pub sale: Option<SaleFigures>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PhaseFigures {
    pub seconds: f64,
    pub counts: BTreeMap<String, f64>,
    /// Role → CPU seconds (user and system, its processes summed).
    pub cpu: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueueFigures {
    pub sessions: u64,
    pub gateways: u64,
    pub bytes_per_connection: f64,
    pub seconds_to_open: f64,
    pub fan_out_ms: Spread,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BurstFigures {
    pub clients: u64,
    /// How long the joins were spread over.
    pub within_ms: f64,
    pub seconds_until_all_ticketed: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BookingFigures {
    pub reservations_per_second: f64,
    pub latency_ms: Spread,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SaleFigures {
    pub clients: u64,
    pub pay_ratio: f64,
    pub think_ms: f64,
    pub seconds_until_opening: f64,
    pub seconds_until_everyone_finished: f64,
    pub join_to_admission_ms: Spread,
    pub paid: u64,
    pub walked_away: u64,
    pub sold_out_while_waiting: u64,
    pub nothing_left_when_admitted: u64,
}

impl Recorded {
    /// The figures of a results folder of `deploy/bench.sh` (`~/.cache/floodgate/bench/<run>`).
    pub fn from_results(dir: &Path) -> anyhow::Result<Self> {
        let machine = markdown::read(&dir.join("machine.json")).unwrap_or(Value::Null);
        let s = |k: &str| machine[k].as_str().unwrap_or("?").to_owned();
        let mut phases = BTreeMap::new();
        for p in markdown::cpu::phases(dir) {
            phases.insert(p.name.clone(), PhaseFigures::of(&p));
        }
        if phases.is_empty() {
            return Err(anyhow!(
                "{} holds no benchmark phases (cpu-*.json)",
                dir.display()
            ));
        }
        let queue = markdown::parts(dir, "queue")?;
        let memory = markdown::read(&dir.join("memory.json"));
        let f = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
        let queue = memory.filter(|_| !queue.is_empty()).map(|m| QueueFigures {
            sessions: f(&m, "/sessions") as u64,
            gateways: f(&m, "/gateways") as u64,
            bytes_per_connection: f(&m, "/bytes_per_connection"),
            seconds_to_open: queue
                .iter()
                .map(|q| f(q, "/seconds_to_open"))
                .fold(0.0, f64::max),
            fan_out_ms: Spread::of(samples(&queue, "/fan_out/samples_ms")),
        });
        let burst = markdown::parts(dir, "burst")?;
        let burst = (!burst.is_empty()).then(|| BurstFigures {
            clients: burst.iter().map(|b| f(b, "/clients")).sum::<f64>() as u64,
            within_ms: burst.iter().map(|b| f(b, "/within_ms")).fold(0.0, f64::max),
            seconds_until_all_ticketed: burst
                .iter()
                .map(|b| f(b, "/seconds_until_all_ticketed"))
                .fold(0.0, f64::max),
        });
        let booking = markdown::read(&dir.join("raw-booking-50.json")).map(|b| BookingFigures {
            reservations_per_second: f(&b, "/reservations_per_second"),
            latency_ms: spread(&b["latency_ms"]),
        });
        let sale = markdown::read(&dir.join("sale.json")).map(|v| SaleFigures {
            clients: f(&v, "/clients") as u64,
            pay_ratio: f(&v, "/pay_ratio"),
            think_ms: f(&v, "/think_ms"),
            seconds_until_opening: f(&v, "/seconds_until_opening"),
            seconds_until_everyone_finished: f(&v, "/seconds_until_everyone_finished"),
            join_to_admission_ms: spread(&v["join_to_admission_ms"]),
            paid: f(&v, "/outcomes/paid") as u64,
            walked_away: f(&v, "/outcomes/walked_away") as u64,
            sold_out_while_waiting: f(&v, "/outcomes/sold_out_while_waiting") as u64,
            nothing_left_when_admitted: f(&v, "/outcomes/nothing_left_when_admitted") as u64,
        });
        Ok(Self {
            run: format!(
                "{} (commit {}; {}, {} cores)",
                s("date"),
                s("commit"),
                s("cpu"),
                machine["cores"]
            ),
            phases,
            queue,
            burst,
            booking,
            sale,
        })
    }

    pub(super) fn phase(&self, name: &str) -> anyhow::Result<&PhaseFigures> {
        self.phases
            .get(name)
            .ok_or_else(|| anyhow!("the run {} has no phase {name}", self.run))
    }

    /// `role`'s CPU per one of `count` in `phase`, in microseconds.
    pub(super) fn per(&self, phase: &str, role: &str, count: &str) -> anyhow::Result<f64> {
        let p = self.phase(phase)?;
        Ok(self.cpu(p, phase, role)? * 1e6 / self.count(p, count)?)
    }

    /// A phase's count of `what`, which must be positive.
    pub(super) fn count(&self, p: &PhaseFigures, what: &str) -> anyhow::Result<f64> {
        p.counts
            .get(what)
            .copied()
            .filter(|n| *n > 0.0)
            .ok_or_else(|| anyhow!("a phase of the run {} counted no {what}", self.run))
    }

    /// `role`'s CPU seconds in `phase`, which it must have taken part in.
    pub(super) fn cpu(&self, p: &PhaseFigures, phase: &str, role: &str) -> anyhow::Result<f64> {
        p.cpu
            .get(role)
            .copied()
            .ok_or_else(|| anyhow!("the phase {phase} of the run {} has no {role}", self.run))
    }
}

impl PhaseFigures {
    fn of(p: &Phase) -> Self {
        let counts = p
            .counts
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
            .collect();
        let cpu = p.roles.keys().map(|r| (r.clone(), p.cpu(r))).collect();
        Self {
            seconds: p.seconds,
            counts,
            cpu,
        }
    }
}

fn samples(parts: &[Value], pointer: &str) -> Vec<f64> {
    parts
        .iter()
        .filter_map(|p| p.pointer(pointer)?.as_array())
        .flatten()
        .filter_map(Value::as_f64)
        .collect()
}

fn spread(v: &Value) -> Spread {
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    Spread {
        p50: f("p50"),
        p99: f("p99"),
        max: f("max"),
    }
}
