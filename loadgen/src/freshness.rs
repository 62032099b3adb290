//! How fresh each waiting client's shown position is, against the truth the load generator
//! derives itself: the frontier, read from Redis every [`SAMPLE_EVERY`], and the client's own
//! ticket (a sale whose people all joined after the opening, all connected, so a ticket's place
//! is its number and nobody ahead is dead). A client's shown position stays as it is until its
//! next message while the truth only falls, so the stalest it ever is comes just before a message
//! arrives, or at the end: it is checked there. The truth compared is the frontier as it was
//! `lag` earlier (the contract gives the gateway a tick to see a change; the message then
//! crosses a busy machine).
//!
//! The contract (`floodgate_protocol::freshness`) holds when no client is ever shown more than
//! its allowance above that truth, and none goes longer than the heartbeat without a message.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use floodgate_client::room::RoomEvent;
use floodgate_protocol::freshness::allowance;
use serde_json::{json, Value};

use crate::report::Latencies;
use crate::waits::Seen;

/// One measurement: the truth as it moves, and every watched client's record.
pub struct Measure {
    truth: Arc<Truth>,
    _reader: tokio::task::JoinHandle<()>,
    lag: Duration,
    clients: Vec<Arc<Mutex<Client>>>,
}

impl Measure {
    /// Starts following `sale`'s frontier in the Redis of `redis`; the truth is compared
    /// `lag_ms` late.
    pub async fn start(
        redis: &floodgate_platform::runtime::RedisArgs,
        sale: &str,
        lag_ms: u64,
    ) -> anyhow::Result<Measure> {
        let keys = redis.keys().map_err(anyhow::Error::msg)?;
        let conn = redis::Client::open(redis.redis_url.as_str())?
            .get_multiplexed_async_connection()
            .await
            .context("Redis, for the frontier")?;
        let (truth, reader) = Truth::follow(conn, keys.sale(sale).frontier());
        Ok(Measure {
            truth,
            _reader: reader,
            lag: Duration::from_millis(lag_ms),
            clients: Vec::new(),
        })
    }

    /// A new client's watcher, which records what it hears.
    pub fn watch(&mut self) -> impl FnMut(Seen<'_>) + Send + 'static {
        let record = Arc::new(Mutex::new(Client::default()));
        self.clients.push(record.clone());
        let (truth, lag) = (self.truth.clone(), self.lag);
        move |seen| {
            let mut record = record.lock().expect("lock");
            match seen {
                Seen::Event(RoomEvent::Ticket(ticket)) => record.place = ticket.ticket,
                Seen::Event(RoomEvent::Position { position, .. }) => {
                    record.heard(Instant::now(), Some(*position), &truth, lag);
                }
                Seen::Event(RoomEvent::PreQueue { .. }) => {
                    record.heard(Instant::now(), None, &truth, lag);
                }
                // Admitted (or gone): nothing more is owed to it.
                Seen::Ended(_) => record.ended(Instant::now(), &truth, lag),
                _ => {}
            }
        }
    }

    /// Ends the measurement now: every client's figures summed up.
    pub fn finish(&self) -> Value {
        let now = Instant::now();
        for record in &self.clients {
            record.lock().expect("lock").end(now, &self.truth, self.lag);
        }
        summary(&self.clients, self.lag)
    }
}

/// How often the frontier is read (a GET on the sale's slot: nothing for Redis).
pub const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// The frontier over time.
#[derive(Default)]
pub struct Truth {
    samples: Mutex<VecDeque<(Instant, u64)>>,
}

/// How much history is kept: enough for any lag given.
const KEPT: Duration = Duration::from_secs(10);

impl Truth {
    /// Reads `key` (the sale's frontier) every [`SAMPLE_EVERY`] until the task is dropped.
    pub fn follow(
        mut redis: redis::aio::MultiplexedConnection,
        key: String,
    ) -> (Arc<Truth>, tokio::task::JoinHandle<()>) {
        let truth = Arc::new(Truth::default());
        let task = tokio::spawn({
            let truth = truth.clone();
            async move {
                let mut every = tokio::time::interval(SAMPLE_EVERY);
                loop {
                    every.tick().await;
                    let frontier: Option<u64> = redis::cmd("GET")
                        .arg(&key)
                        .query_async(&mut redis)
                        .await
                        .unwrap_or(None);
                    truth.record(Instant::now(), frontier.unwrap_or(0));
                }
            }
        });
        (truth, task)
    }

    fn record(&self, at: Instant, frontier: u64) {
        let mut samples = self.samples.lock().expect("lock");
        while samples
            .front()
            .is_some_and(|(t, _)| at.duration_since(*t) > KEPT)
        {
            samples.pop_front();
        }
        samples.push_back((at, frontier));
    }

    /// The frontier as last read at or before `at`.
    fn at(&self, at: Instant) -> Option<u64> {
        let samples = self.samples.lock().expect("lock");
        let i = samples.partition_point(|(t, _)| *t <= at);
        i.checked_sub(1).map(|i| samples[i].1)
    }
}

/// One client's record: what it shows, since when, and the worst seen.
#[derive(Debug, Default)]
pub struct Client {
    /// Its place in line (its ticket's number); 0 until it holds one.
    pub place: u64,
    shown: Option<u64>,
    last_heard: Option<Instant>,
    /// Most places shown above the truth, and that as a share of the truth.
    pub worst_over: u64,
    pub worst_share: f64,
    /// Most places above the truth's allowance (0: the contract held).
    pub worst_excess: u64,
    /// Longest time without a message.
    pub longest_silence: Duration,
    /// Its wait is over (admitted, sold out, failed): it is owed nothing more.
    done: bool,
}

impl Client {
    /// A message arrived at `now`: showing `position` (`None`: a message that shows no
    /// position, such as the pre-queue's size).
    pub fn heard(&mut self, now: Instant, position: Option<u64>, truth: &Truth, lag: Duration) {
        self.check(now, truth, lag);
        self.last_heard = Some(now);
        if position.is_some() {
            self.shown = position;
        }
    }

    /// The measurement ends at `now`: the position shown since the last message is checked
    /// once more, and the silence since.
    pub fn end(&mut self, now: Instant, truth: &Truth, lag: Duration) {
        if !self.done {
            self.check(now, truth, lag);
        }
    }

    /// Its wait ended at `now` (its admission, or the sale's end): checked up to then, and no
    /// further (an admitted client hears nothing more, and is not silent for it).
    pub fn ended(&mut self, now: Instant, truth: &Truth, lag: Duration) {
        if !self.done {
            self.check(now, truth, lag);
            self.done = true;
        }
    }

    /// Checks the position shown until `now` against the truth `lag` earlier.
    fn check(&mut self, now: Instant, truth: &Truth, lag: Duration) {
        if let Some(last) = self.last_heard {
            self.longest_silence = self.longest_silence.max(now.duration_since(last));
        }
        let (Some(shown), Some(frontier)) = (self.shown, truth.at(now - lag)) else {
            return;
        };
        if self.place <= frontier {
            // Admitted by then: the admission itself is what it waits for.
            return;
        }
        let truth = self.place - frontier;
        let over = shown.saturating_sub(truth);
        self.worst_over = self.worst_over.max(over);
        self.worst_share = self.worst_share.max(over as f64 / truth as f64);
        self.worst_excess = self.worst_excess.max(over.saturating_sub(allowance(truth)));
    }
}

/// Every client's record, summed up: the stalest shown position (in places and as a share of
/// the truth, max and p99 over clients), how many clients were ever past their allowance and by
/// how much at most, and the longest silence (max and p99).
pub fn summary(clients: &[Arc<Mutex<Client>>], lag: Duration) -> Value {
    let records: Vec<_> = clients
        .iter()
        .map(|c| {
            let c = c.lock().expect("lock");
            (
                c.worst_over,
                c.worst_share,
                c.worst_excess,
                c.longest_silence,
            )
        })
        .collect();
    let mut over: Vec<u64> = records.iter().map(|r| r.0).collect();
    let mut share: Vec<f64> = records.iter().map(|r| r.1).collect();
    over.sort_unstable();
    share.sort_by(f64::total_cmp);
    let past = records.iter().filter(|r| r.2 > 0).count();
    json!({
        "clients": records.len(),
        "lag_ms": lag.as_millis() as u64,
        "stale_places_p99": percentile(&over, 0.99),
        "stale_places_max": over.last().copied().unwrap_or(0),
        "stale_share_p99": percentile(&share, 0.99),
        "stale_share_max": share.last().copied().unwrap_or(0.0),
        "clients_past_allowance": past,
        "worst_excess_places": records.iter().map(|r| r.2).max().unwrap_or(0),
        "silence_ms": Latencies::of(records.iter().map(|r| r.3)),
    })
}

fn percentile<T: Copy + Default>(sorted: &[T], q: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stalest_moment_is_just_before_a_message_against_the_lagged_truth() {
        let truth = Truth::default();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        truth.record(ms(0), 0);
        truth.record(ms(100), 50);
        truth.record(ms(200), 100);
        let lag = Duration::from_millis(100);
        let mut client = Client {
            place: 5_000,
            ..Client::default()
        };
        client.heard(ms(0), Some(5_000), &truth, lag);
        // At 250 ms the truth 100 ms earlier (frontier 50) is 4,950: shown 50 above.
        client.heard(ms(250), Some(4_950), &truth, lag);
        assert_eq!(client.worst_over, 50);
        assert_eq!(client.worst_excess, 1, "the allowance at 4,950 is 49");
        assert_eq!(client.longest_silence, Duration::from_millis(250));
        // At 400 ms the truth is 4,900 (frontier 100): 4,950 is within 49 of it.
        client.end(ms(400), &truth, lag);
        assert_eq!(client.worst_over, 50);
        assert!((client.worst_share - 50.0 / 4_900.0).abs() < 1e-9);
    }

    #[test]
    fn an_admitted_client_is_not_stale() {
        let truth = Truth::default();
        let t0 = Instant::now();
        truth.record(t0, 10);
        let mut client = Client {
            place: 7,
            ..Client::default()
        };
        client.heard(t0, Some(3), &truth, Duration::ZERO);
        client.ended(t0 + Duration::from_millis(10), &truth, Duration::ZERO);
        client.end(t0 + Duration::from_secs(60), &truth, Duration::ZERO);
        assert_eq!((client.worst_over, client.worst_excess), (0, 0));
        assert_eq!(
            client.longest_silence,
            Duration::from_millis(10),
            "not silent once admitted"
        );
    }

    #[test]
    fn the_summary_counts_clients_past_their_allowance() {
        let clients: Vec<_> = [(0, 0), (30, 0), (120, 20)]
            .into_iter()
            .map(|(over, excess)| {
                Arc::new(Mutex::new(Client {
                    worst_over: over,
                    worst_excess: excess,
                    ..Client::default()
                }))
            })
            .collect();
        let summary = summary(&clients, Duration::from_millis(250));
        assert_eq!(summary["clients_past_allowance"], 1);
        assert_eq!(summary["worst_excess_places"], 20);
        assert_eq!(summary["stale_places_max"], 120);
        assert_eq!(summary["stale_places_p99"], 120);
    }
}
