//! What the simulator knows of the machines: the figures one benchmark run recorded
//! ([`Recorded`], read from `deploy/bench.sh`'s JSON or from a committed fixture of it) and the
//! unit costs calibrated from them ([`Costs`]: CPU per join, per message, per request, per
//! event; Redis time per script; memory per connection).

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

    fn phase(&self, name: &str) -> anyhow::Result<&PhaseFigures> {
        self.phases
            .get(name)
            .ok_or_else(|| anyhow!("the run {} has no phase {name}", self.run))
    }

    /// `role`'s CPU per one of `count` in `phase`, in microseconds.
    fn per(&self, phase: &str, role: &str, count: &str) -> anyhow::Result<f64> {
        let p = self.phase(phase)?;
        Ok(self.cpu(p, phase, role)? * 1e6 / self.count(p, count)?)
    }

    /// A phase's count of `what`, which must be positive.
    fn count(&self, p: &PhaseFigures, what: &str) -> anyhow::Result<f64> {
        p.counts
            .get(what)
            .copied()
            .filter(|n| *n > 0.0)
            .ok_or_else(|| anyhow!("a phase of the run {} counted no {what}", self.run))
    }

    /// `role`'s CPU seconds in `phase`, which it must have taken part in.
    fn cpu(&self, p: &PhaseFigures, phase: &str, role: &str) -> anyhow::Result<f64> {
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

/// The unit costs the model runs on, each from one phase of a recorded run.
#[derive(Clone, Debug, Serialize)]
pub struct Costs {
    /// The run they come from.
    pub run: String,
    /// The gateways' CPU per join and its leave (the burst).
    pub gateway_join_us: f64,
    /// The sale's slot's Redis CPU per join (the burst: joins go in batches).
    pub slot_join_us: f64,
    /// The gateways' CPU per message of a change sent to everyone (the fan-out).
    pub gateway_message_us: f64,
    pub gateway_bytes_per_connection: f64,
    /// A waiting client's cost a second to the gateways, at the front of the line and behind a
    /// million others (waiting by push: heartbeats and the places that cross the grid).
    pub gateway_wait_front_us_per_client_s: f64,
    pub gateway_wait_behind_us_per_client_s: f64,
    /// The sale's slot's Redis CPU a second while people wait: the leader's tick and the
    /// gateways' reads, whatever the line's length (a waiting client costs Redis nothing of its
    /// own: the gateways work out places themselves).
    pub slot_us_per_s: f64,
    /// The booking service's CPU per reservation request (claim, script, broker ack, ack, 201).
    pub booking_request_us: f64,
    /// Redis time of a reservation's three scripts (by `INFO commandstats`, shared out as
    /// `redis-benchmark` times each): spending the token on the sale's slot, the pool's
    /// `reserve` on its primary (every pool tried), its `ack` there (every hold).
    pub claim_script_us: f64,
    pub reserve_script_us: f64,
    pub ack_script_us: f64,
    /// The broker's, the consumer's and PostgreSQL's CPU per event.
    pub broker_event_us: f64,
    pub consumer_event_us: f64,
    pub postgres_event_us: f64,
    /// A reservation's latency with nothing queued: the broker's round trip, mostly (p50).
    pub reservation_base_ms: f64,
    /// On the benchmark's machine, where everything shares its cores: the cores the gateways
    /// got while joins came (the queue's opening) and the reservations a second the booking
    /// endpoint answered end to end.
    pub bench_gateway_cores: f64,
    pub bench_booking_per_second: f64,
    /// The cores the gateways got while one change went out to everyone (the fan-out).
    pub bench_fanout_cores: f64,
}

impl Costs {
    /// The unit costs of one recorded run.
    pub fn calibrate(r: &Recorded) -> anyhow::Result<Self> {
        let queue = r.queue.as_ref().context("the run has no queue scenario")?;
        let booking = r
            .booking
            .as_ref()
            .context("the run has no raw booking scenario")?;
        let fanout = r.phase("queue-fanout")?;
        let opening = r.phase("queue-opening")?;
        let booked = r.phase("raw-booking-50")?;
        // A waiting client's CPU a second: the phase's CPU over its clients and its seconds.
        let per_client_s = |phase: &str, role: &str| -> anyhow::Result<f64> {
            Ok(r.per(phase, role, "clients")? / r.phase(phase)?.seconds.max(1e-9))
        };
        let scripts = r.count(booked, "evalsha_usec")? / r.count(booked, "reservations")?;
        let alone = |script: &str| r.per(&format!("raw-script-{script}"), "redis", "requests");
        let (claim, reserve, ack) = (alone("claim_token")?, alone("reserve")?, alone("ack")?);
        let share = scripts / (claim + reserve + ack).max(1e-9);
        let waiting = r.phase("poll-push-behind")?;
        Ok(Self {
            run: r.run.clone(),
            gateway_join_us: r.per("burst", "gateway", "joins")?,
            slot_join_us: r.per("burst", "redis", "joins")?,
            gateway_message_us: r.per("queue-fanout", "gateway", "messages")?,
            gateway_bytes_per_connection: queue.bytes_per_connection,
            gateway_wait_front_us_per_client_s: per_client_s("poll-push", "gateway")?,
            gateway_wait_behind_us_per_client_s: per_client_s("poll-push-behind", "gateway")?,
            slot_us_per_s: r.cpu(waiting, "poll-push-behind", "redis")? * 1e6
                / waiting.seconds.max(1e-9),
            booking_request_us: r.per("raw-booking-50", "booking", "reservations")?,
            claim_script_us: claim * share,
            reserve_script_us: reserve * share,
            ack_script_us: ack * share,
            broker_event_us: r.per("raw-booking-50", "broker", "reservations")?,
            consumer_event_us: r.per("raw-consume-50", "consumer", "events")?,
            postgres_event_us: r.per("raw-consume-50", "postgres", "events")?,
            reservation_base_ms: booking.latency_ms.p50,
            bench_gateway_cores: r.cpu(opening, "queue-opening", "gateway")?
                / opening.seconds.max(1e-9),
            bench_booking_per_second: booking.reservations_per_second,
            bench_fanout_cores: r.cpu(fanout, "queue-fanout", "gateway")?
                / fanout.seconds.max(1e-9),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_a_phase_or_a_role_the_costs_need_is_refused_by_name() {
        let mut run: Recorded = serde_json::from_str(DEFAULT_RUN).unwrap();
        assert!(Costs::calibrate(&run).is_ok());
        run.phases.remove("poll-push-behind");
        let refused = Costs::calibrate(&run).unwrap_err().to_string();
        assert!(refused.contains("poll-push-behind"), "{refused}");
        let mut run: Recorded = serde_json::from_str(DEFAULT_RUN).unwrap();
        run.phases.get_mut("burst").unwrap().cpu.remove("gateway");
        let refused = Costs::calibrate(&run).unwrap_err().to_string();
        assert!(
            refused.contains("burst") && refused.contains("gateway"),
            "{refused}"
        );
        let mut run: Recorded = serde_json::from_str(DEFAULT_RUN).unwrap();
        run.phases
            .get_mut("burst")
            .unwrap()
            .counts
            .insert("joins".into(), 0.0);
        assert!(Costs::calibrate(&run).is_err());
    }

    #[test]
    fn a_results_folder_without_phases_is_refused() {
        let dir = std::env::temp_dir().join(format!("simulate-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let refused = Recorded::from_results(&dir).unwrap_err().to_string();
        assert!(refused.contains("no benchmark phases"), "{refused}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
