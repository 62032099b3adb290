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
    /// A crowd of `people` as a big sale sees it: half in the pre-queue over the ten minutes
    /// before the opening, the other half in the spike (a mean of 5 s after it); a waiting person
    /// stays ten minutes on average; 10 s to choose, 70 % pay within 30 s, 1 or 2 seats each.
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
