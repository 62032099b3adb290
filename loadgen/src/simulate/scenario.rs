//! What a simulated sale is made of: the sale (from its file, read as the booking service reads
//! it), the crowd that comes for it, and the fleet that serves them.

use std::path::Path;

use anyhow::Context as _;
use floodgate_booking::catalog::SaleFile;
use floodgate_platform::autopilot::Settings;

use super::costs::Costs;

/// The sale's settings that shape a rush.
#[derive(Clone, Debug)]
pub struct Sale {
    /// Each pool's seats.
    pub pools: Vec<u32>,
    pub admission_rate: f64,
    pub active_cap: u64,
    pub stock_factor: f64,
    pub hold_ttl_ms: i64,
    pub token_ttl_ms: i64,
    /// How long an unspent pass counts against the stock and the cap (at most `token_ttl_ms`).
    pub stock_hold_ms: i64,
    pub max_seats: u32,
}

impl Sale {
    /// The sale a file declares, checked as `floodgate-booking sale create` checks it.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        let file = SaleFile::parse(&text).with_context(|| format!("{}", path.display()))?;
        Self::from_file(&file)
    }

    /// The sale a parsed file declares.
    pub fn from_file(file: &SaleFile) -> anyhow::Result<Self> {
        // The model numbers pools in 16 bits: a sale has a few dozen.
        anyhow::ensure!(
            file.pools.len() <= usize::from(u16::MAX),
            "the simulator takes at most {} pools",
            u16::MAX
        );
        Ok(Self {
            pools: file.pools.iter().map(|p| p.capacity).collect(),
            admission_rate: file.admission_rate,
            active_cap: u64::from(file.active_cap),
            stock_factor: file.stock_factor,
            hold_ttl_ms: i64::from(file.hold_ttl_secs) * 1_000,
            token_ttl_ms: i64::from(file.token_ttl_secs) * 1_000,
            stock_hold_ms: i64::from(file.stock_hold_secs.unwrap_or(file.token_ttl_secs))
                .min(i64::from(file.token_ttl_secs))
                * 1_000,
            max_seats: file.max_seats_per_booking,
        })
    }

    pub fn seats(&self) -> u64 {
        self.pools.iter().map(|&c| u64::from(c)).sum()
    }
}

/// Who comes, when, and what they do. Times are against the opening (negative: before it).
#[derive(Clone, Debug)]
pub struct Crowd {
    pub people: u64,
    /// The share who come before the opening (the pre-queue; the lottery orders them).
    pub prequeue: f64,
    /// The pre-queue comes from this long before the opening, spread over `prequeue_spread_s`.
    pub prequeue_from_s: f64,
    pub prequeue_spread_s: f64,
    /// The rest come after the opening, exponentially with this mean (the spike, then late
    /// arrivals).
    pub spike_s: f64,
    /// How long a waiting person stays, on average (exponential); `None`: everyone stays.
    pub patience_s: Option<f64>,
    /// Time from admission to the first request (each draws 0.5x to 1.5x of it).
    pub think_ms: f64,
    /// Share of holders who pay; the rest walk away and their hold expires.
    pub pay_ratio: f64,
    /// Time from the 201 to paid.
    pub pay_ms: f64,
    /// Each asks for 1 to this many seats (and no more than the sale allows).
    pub seats: u32,
    /// The autopilot's settings, if it steers the rate.
    pub autopilot: Option<Settings>,
    pub seed: u64,
}

impl Crowd {
    /// A crowd of `people` as a big sale sees it (each of [`CrowdArgs`]' defaults): half in the
    /// pre-queue over the ten minutes before the opening, the other half in the spike (a mean of
    /// 5 s after it); a waiting person stays ten minutes on average; 10 s to choose, 70 % pay
    /// within 30 s, 1 or 2 seats each.
    pub fn rush(people: u64) -> Self {
        Self {
            people,
            prequeue: 0.5,
            prequeue_from_s: 600.0,
            prequeue_spread_s: 600.0,
            spike_s: 5.0,
            patience_s: Some(600.0),
            think_ms: 10_000.0,
            pay_ratio: 0.7,
            pay_ms: 30_000.0,
            seats: 2,
            autopilot: None,
            seed: 1,
        }
    }
}

/// The crowd's shape on the command line, for a sale whose people behave otherwise than
/// [`Crowd::rush`] (whose figures are the defaults).
#[derive(Clone, Debug, clap::Args)]
pub struct CrowdArgs {
    /// The share of the crowd that comes before the opening (the pre-queue), 0 to 1.
    #[arg(long, default_value_t = 0.5)]
    pub prequeue: f64,
    /// How long before the opening the pre-queue starts forming, in minutes (it forms evenly).
    #[arg(long, default_value_t = 10.0)]
    pub prequeue_minutes: f64,
    /// The mean time after the opening the others come, in seconds (the spike, then the late).
    #[arg(long, default_value_t = 5.0)]
    pub spike_secs: f64,
    /// How long a waiting person stays, on average, in seconds (0: everyone stays).
    #[arg(long, default_value_t = 600.0)]
    pub patience_secs: f64,
    /// Time from admission to the first request, in seconds (each takes 0.5x to 1.5x).
    #[arg(long, default_value_t = 10.0)]
    pub think_secs: f64,
    /// The share of holders who pay, 0 to 1; the others walk away and their hold expires.
    #[arg(long, default_value_t = 0.7)]
    pub pay_ratio: f64,
    /// Time from the hold to paid, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub pay_secs: f64,
    /// Each asks for 1 to this many seats (and no more than the sale allows).
    #[arg(long, default_value_t = 2)]
    pub seats: u32,
}

impl CrowdArgs {
    /// The crowd of `people`, each figure checked.
    pub fn crowd(&self, people: u64) -> anyhow::Result<Crowd> {
        let share = |v: f64| v.is_finite() && (0.0..=1.0).contains(&v);
        // A day at most: longer is a typo, and the virtual clock stops at six hours anyway.
        let span = |v: f64| v.is_finite() && (0.0..=86_400.0).contains(&v);
        anyhow::ensure!(share(self.prequeue), "--prequeue takes a share from 0 to 1");
        anyhow::ensure!(
            share(self.pay_ratio),
            "--pay-ratio takes a share from 0 to 1"
        );
        anyhow::ensure!(
            span(self.prequeue_minutes * 60.0),
            "--prequeue-minutes takes 0 to 1440"
        );
        for (name, value) in [
            ("--spike-secs", self.spike_secs),
            ("--patience-secs", self.patience_secs),
            ("--think-secs", self.think_secs),
            ("--pay-secs", self.pay_secs),
        ] {
            anyhow::ensure!(span(value), "{name} takes 0 to 86400 seconds");
        }
        anyhow::ensure!((1..=16).contains(&self.seats), "--seats takes 1 to 16");
        let before = self.prequeue_minutes * 60.0;
        Ok(Crowd {
            prequeue: self.prequeue,
            prequeue_from_s: before,
            prequeue_spread_s: before,
            spike_s: self.spike_secs,
            patience_s: (self.patience_secs > 0.0).then_some(self.patience_secs),
            think_ms: self.think_secs * 1e3,
            pay_ratio: self.pay_ratio,
            pay_ms: self.pay_secs * 1e3,
            seats: self.seats,
            ..Crowd::rush(people)
        })
    }
}

/// The machines that serve the sale, as capacities.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Cores the gateways have between them.
    pub gateway_cores: f64,
    /// Reservation requests a second the booking fleet answers at most.
    pub booking_per_second: f64,
    /// Primaries the pools' slots spread over (each runs its pools' scripts one at a time).
    pub pool_primaries: u32,
}

impl Fleet {
    /// A fleet of `gateways` and `booking` instances, each with `cores` cores, and
    /// `primaries` Redis primaries for the pools.
    pub fn of(costs: &Costs, gateways: u32, booking: u32, primaries: u32, cores: f64) -> Self {
        Self {
            gateway_cores: f64::from(gateways) * cores,
            booking_per_second: f64::from(booking) * cores * 1e6 / costs.booking_request_us,
            pool_primaries: primaries.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        shape: CrowdArgs,
    }

    /// The flags' defaults are the standard rush the docs describe; the flags change it.
    #[test]
    fn the_flags_defaults_are_the_standard_rush() {
        let parsed = |args: &[&str]| {
            let line = Line::try_parse_from([&["simulate"][..], args].concat()).unwrap();
            line.shape.crowd(1_000)
        };
        let rush = Crowd::rush(1_000);
        let default = parsed(&[]).unwrap();
        assert_eq!(
            format!("{default:?}"),
            format!("{rush:?}"),
            "the defaults drifted from Crowd::rush"
        );
        let patient = parsed(&["--patience-secs", "0", "--pay-ratio", "1"]).unwrap();
        assert_eq!((patient.patience_s, patient.pay_ratio), (None, 1.0));
        assert!(parsed(&["--prequeue", "1.5"]).is_err());
        assert!(parsed(&["--think-secs=-1"]).is_err());
        assert!(parsed(&["--seats", "0"]).is_err());
    }
}
