//! `floodgate-loadgen simulate`: a sale on a virtual clock, to predict what the machines will do
//! before the rush, and the fleet to run it.
//!
//! The model (`model/`) plays every person of the crowd (arrival, ticket, wait, admission,
//! reservation, payment or expiry) against capacities and unit costs (`costs`) calibrated from
//! one recorded benchmark run (`recorded`); admission follows the gateways' own rule and, if
//! asked, the autopilot's own controller. `plan` sizes the fleet from what the model measured,
//! and `output` prints it and writes the kustomize patch that pre-scales it, never below what the
//! overlay sets (`overlay`); `capacity` renders `docs/capacity.md`'s generated part.
//! `validation` checks the model against recorded runs: calibrated on one, it predicts another's
//! figures within the spread of runs on these machines.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use floodgate_platform::autopilot::Settings;
use floodgate_protocol::settings::check_admission_rate;

pub mod capacity;
pub mod costs;
pub mod model;
mod output;
pub mod overlay;
pub mod plan;
mod recorded;
pub mod scenario;
mod spread;
pub mod validation;

use costs::{recorded, Costs};
use scenario::{CrowdArgs, Sale};

/// The largest crowd simulated: every person is kept (about a hundred bytes each), so fifty
/// million people take a few GB.
const MAX_CROWD: u64 = 50_000_000;

/// What to simulate: `floodgate-loadgen simulate --help` documents each.
#[derive(Clone, Debug, clap::Args)]
pub struct SimulateArgs {
    /// The sale file (as `floodgate-booking sale create` takes it).
    #[arg(long, required_unless_present = "show_calibration")]
    pub sale: Option<PathBuf>,
    /// People in the rush.
    #[arg(long, default_value_t = 2_000_000)]
    pub crowd: u64,
    /// How the crowd comes and behaves.
    #[command(flatten)]
    pub shape: CrowdArgs,
    /// A results folder of `deploy/bench.sh` to calibrate on (default: the committed run,
    /// `loadgen/fixtures/bench-b.json`), or a JSON file of recorded figures.
    #[arg(long)]
    pub calibrate: Option<PathBuf>,
    /// Cores of each gateway and booking instance (their Kubernetes CPU request).
    #[arg(long, default_value_t = 1.0)]
    pub cores: f64,
    /// The open files one gateway may hold (its `nofile` limit): connections per gateway.
    #[arg(long, default_value_t = 100_000)]
    pub connections_per_gateway: u64,
    /// Waiting people one edge Pod passes on (each is two of its sockets): the shipped edge's
    /// two workers hold 131,072 in about 3.8 GB of its 4 GiB (docs/deploy.md), less a spare.
    #[arg(long, default_value_t = 100_000)]
    pub clients_per_edge: u64,
    /// Run the autopilot between this floor and ceiling (admissions a second), `FLOOR,CEILING`.
    #[arg(long, value_delimiter = ',')]
    pub autopilot: Option<Vec<f64>>,
    /// The draw of the crowd (who comes when, who pays): another seed, another crowd alike.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write the plan as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the kustomize patch that pre-scales the fleet to this file.
    #[arg(long)]
    pub patch: Option<PathBuf>,
    /// The overlay's `scale.yaml` the patch goes on top of: it raises what that sets and never
    /// lowers it (default: deploy/k8s/overlays/production/scale.yaml as committed).
    #[arg(long)]
    pub scale: Option<PathBuf>,
    /// Print the calibration's recorded figures (JSON, on stdout: what `--calibrate` takes back,
    /// and what the fixtures hold) and its unit costs (on stderr), and stop.
    #[arg(long)]
    pub show_calibration: bool,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let recorded = recorded(args.calibrate.as_ref())?;
    let costs = Costs::calibrate(&recorded)?;
    if args.show_calibration {
        println!("{}", serde_json::to_string_pretty(&recorded)?);
        eprintln!("{}", serde_json::to_string_pretty(&costs)?);
        return Ok(());
    }
    anyhow::ensure!(
        (1..=MAX_CROWD).contains(&args.crowd),
        "--crowd takes 1 to {MAX_CROWD} people"
    );
    anyhow::ensure!(
        args.cores.is_finite() && args.cores > 0.0,
        "--cores takes a positive number of cores"
    );
    anyhow::ensure!(
        args.connections_per_gateway > 0 && args.clients_per_edge > 0,
        "--connections-per-gateway and --clients-per-edge take a positive number"
    );
    let path = args.sale.context("--sale names the sale file")?;
    let sale = Sale::read(&path)?;
    let mut crowd = args.shape.crowd(args.crowd)?;
    crowd.seed = args.seed;
    if let Some(bounds) = &args.autopilot {
        let &[floor, ceiling] = bounds.as_slice() else {
            anyhow::bail!("--autopilot takes FLOOR,CEILING");
        };
        for rate in [floor, ceiling] {
            check_admission_rate(rate).map_err(|e| anyhow::anyhow!("--autopilot: {e}"))?;
        }
        anyhow::ensure!(
            floor <= ceiling,
            "--autopilot takes FLOOR,CEILING with FLOOR <= CEILING"
        );
        crowd.autopilot = Some(Settings::new(floor, ceiling));
    }
    let started = Instant::now();
    let shape = plan::Shape {
        cores: args.cores,
        connections_per_gateway: args.connections_per_gateway,
        clients_per_edge: args.clients_per_edge,
    };
    let floors = match &args.scale {
        Some(file) => {
            let text =
                std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
            overlay::floors(&text).with_context(|| format!("{}", file.display()))?
        }
        None => overlay::floors(overlay::PRODUCTION)?,
    };
    let plan = plan::plan(&costs, &sale, &crowd, &shape, floors);
    println!("{}", plan.describe(&path.display().to_string()));
    println!(
        "(simulated {} people{} in {:.1} s, calibrated on {})",
        args.crowd,
        if crowd.autopilot.is_some() {
            " with the autopilot"
        } else {
            ""
        },
        started.elapsed().as_secs_f64(),
        costs.run
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&plan)?)?;
    }
    if let Some(path) = &args.patch {
        std::fs::write(path, plan.patch())?;
    }
    Ok(())
}
