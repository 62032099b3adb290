//! Floodgate's consumer: reads the reservations topic and writes every decision to PostgreSQL.
//!
//! # Layout
//! - [`lib.rs`](self): [`run`], the consume-apply-commit loop, in batches, and
//!   the one way a step is retried until it is done.
//! - `config`: the consumer's settings ([`Config`]); `service`: the consumer as
//!   `floodgate_platform::service` runs it ([`Consumer`]: its loop, its admin listener, its
//!   goodbye to the group).
//! - `membership`: the consumer group, kept in PostgreSQL (who reads which partition, and each
//!   partition's offset).
//! - `intake`: reading the partitions this member holds, in batches.
//! - [`store`]: the state machine and applying a batch of events to the database, idempotently.
//! - `dead_letter`: the topic where events that can never be applied are set aside.
//! - `lag`: the group's lag, published as metrics.
//! - [`probes`]: the admin listener (`/metrics`, `/healthz`, `/readyz`).
//! - [`supervise`]: the binary's process runs the consumer as a worker of its own and starts it
//!   again when a crash kills it (the Kafka client's, see there).
//!
//! Order of effects, which is what makes each event applied once: a batch's undecodable messages
//! go to the dead-letter topic first; then its rows and its partitions' offsets are committed in
//! one PostgreSQL transaction, which also checks that this member still holds those partitions.
//! A crash before the commit leaves nothing, and the partition's next reader starts at the
//! stored offset. (A batch with an event that violates a constraint is applied one event at a
//! time, its poison sent to the dead-letter topic, and the offsets moved after: a crash in
//! between applies those events again, and the writes keyed on the reservation id and the event
//! id absorb the repeat.)

mod config;
mod dead_letter;
mod intake;
mod lag;
pub mod membership;
pub mod probes;
mod service;
pub mod store;
pub mod supervise;

use std::time::Duration;

use rdkafka::message::{Message, OwnedMessage};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use dead_letter::DeadLetters;
use intake::{next_batch, Next};
use membership::{Fence, Membership};

pub use config::Config;
pub use service::Consumer;

/// How long to wait before retrying after PostgreSQL or the broker failed. Short enough to catch
/// up quickly after a blip; the offset is not committed meanwhile, so nothing is skipped.
pub(crate) const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Consumes until `shutdown` is cancelled, then gives this member's partitions back.
pub async fn run(config: &Config, db: PgPool, shutdown: CancellationToken) -> anyhow::Result<()> {
    floodgate_platform::runtime::metrics();
    // Served from the start, at zero, so the alert over it has a series before the first one.
    metrics::counter!("floodgate_consumer_poison_total").increment(0);
    // The same for the worker's restarts (the binary sets the count, supervise.rs).
    metrics::gauge!("floodgate_consumer_worker_restarts").increment(0.0);
    let topic = config.kafka.reservations_topic.clone();
    let consumer = std::sync::Arc::new(intake::connect(config)?);
    let dead_letters = DeadLetters::new(&config.kafka, config.dlq_topic())?;
    let mut group = Membership::new(
        db.clone(),
        &config.group,
        &topic,
        config.instance_id.as_deref(),
        config.session_timeout,
    );
    let lag = tokio::spawn(lag::report_lag(
        config.kafka.clone(),
        db.clone(),
        config.group.clone(),
        shutdown.clone(),
    ));
    tracing::info!(%topic, group = %config.group, "consumer started");
    let linger = config.batch_linger;
    let mut next_round = tokio::time::Instant::now();
    let mut rewind = false;
    loop {
        if tokio::time::Instant::now() >= next_round {
            next_round = tokio::time::Instant::now() + group.interval();
            if let Err(e) = take_round(&consumer, &mut group, &topic, rewind).await {
                // Tried again next round; meanwhile the partitions held are still read, and a
                // batch for one taken away is refused at its commit.
                tracing::warn!(error = %e, "the group's round failed");
            } else {
                rewind = false;
            }
        }
        let max = config.batch_max.max(1);
        let until_round = next_round.saturating_duration_since(tokio::time::Instant::now());
        let batch = match next_batch(&consumer, max, linger, &shutdown, Some(until_round)).await {
            Next::Shutdown => break,
            Next::Idle => continue,
            Next::Batch(batch) => batch,
        };
        let fence = group.fence();
        // Fetched before a partition was given back: its new reader has them.
        let batch: Vec<OwnedMessage> = batch
            .into_iter()
            .filter(|m| fence.epochs.contains_key(&m.partition()))
            .collect();
        if batch.is_empty() {
            continue;
        }
        match handle(&db, &dead_letters, &batch, &fence, &shutdown).await {
            None => break,
            Some(Ok(())) => {}
            Some(Err(partition)) => {
                // Nothing of the batch was written: read again from the stored offsets of
                // whatever this member still holds.
                tracing::warn!(partition, "a partition was taken over; rebalancing");
                next_round = tokio::time::Instant::now();
                rewind = true;
            }
        }
    }
    lag.abort();
    if let Err(e) = group.leave().await {
        tracing::warn!(error = %e, "could not give the partitions back; they pass on when the session lapses");
    }
    tracing::info!("consumer stopped");
    Ok(())
}

/// One round of the group; reads the partitions anew if they changed (or `rewind`: a batch was
/// refused and the positions must go back to the stored offsets).
async fn take_round(
    consumer: &std::sync::Arc<rdkafka::consumer::StreamConsumer>,
    group: &mut Membership,
    topic: &str,
    rewind: bool,
) -> anyhow::Result<()> {
    let partitions = intake::partitions(consumer, topic).await?;
    if group.rebalance(partitions).await? || rewind {
        intake::assign(consumer, topic, group.owned())?;
        metrics::gauge!("floodgate_consumer_partitions").set(group.owned().len() as f64);
    }
    Ok(())
}

/// One span per event that carries a trace (platform::trace), open while its batch is written
/// (the caller drops them after): the reservation's trace ends with the row in PostgreSQL.
fn write_spans(batch: &[OwnedMessage]) -> Vec<tracing::Span> {
    batch
        .iter()
        .filter(|m| m.headers().is_some())
        .map(|m| {
            let span = tracing::info_span!(
                "write booking",
                partition = m.partition(),
                offset = m.offset()
            );
            floodgate_platform::trace::from_kafka(&span, m.headers());
            span
        })
        .collect()
}

/// Puts one batch in the database with its partitions' offsets, and its poison messages on the
/// dead-letter topic, retrying each step until it is done; `None` if shut down first,
/// `Some(Err(partition))` if this member no longer holds a partition of the batch (nothing of it
/// was written).
async fn handle(
    db: &PgPool,
    dead_letters: &DeadLetters,
    batch: &[OwnedMessage],
    fence: &Fence,
    shutdown: &CancellationToken,
) -> Option<Result<(), i32>> {
    metrics::histogram!("floodgate_consumer_batch_size").record(batch.len() as f64);
    let mut events = Vec::with_capacity(batch.len());
    let mut undecodable = Vec::new();
    for message in batch {
        let payload = message.payload().unwrap_or_default();
        match store::decode(payload, message.partition(), message.offset()) {
            Ok(event) => events.push(event),
            Err(e) => undecodable.push((message, e.to_string())),
        }
    }
    // Set aside before the offsets pass them: a poison message is never lost.
    set_aside(dead_letters, &undecodable, shutdown).await?;
    let next = intake::next_offsets(batch);
    let advance = store::Advance { fence, next: &next };
    let applying = std::time::Instant::now();
    let _writes = write_spans(batch);
    let applied = until_done(
        shutdown,
        || apply(db, &events, &advance),
        |e| {
            metrics::counter!("floodgate_consumer_db_retries_total").increment(1);
            tracing::warn!(error = %e, "database write failed; retrying");
        },
    )
    .await?;
    let applied = match applied {
        Ok(applied) => applied,
        Err(partition) => return Some(Err(partition)),
    };
    if !applied.poison.is_empty() {
        let poison: Vec<(&OwnedMessage, String)> = applied
            .poison
            .iter()
            .map(|(index, reason)| {
                let event = &events[*index];
                let message = batch
                    .iter()
                    .find(|m| m.partition() == event.partition && m.offset() == event.offset)
                    .expect("every event comes from a message of the batch");
                (message, reason.clone())
            })
            .collect();
        set_aside(dead_letters, &poison, shutdown).await?;
        let moved = until_done(
            shutdown,
            || async {
                match store::advance_offsets(db, &advance).await {
                    Ok(()) => Ok(Ok(())),
                    Err(store::ApplyError::Fenced(p)) => Ok(Err(p)),
                    Err(e) => Err(e),
                }
            },
            |e| tracing::warn!(error = %e, "storing the offsets failed; retrying"),
        )
        .await?;
        if let Err(partition) = moved {
            return Some(Err(partition));
        }
    }
    // Each event that moved a booking wrote one row; the rest (late, repeated, refund
    // progress) changed nothing but the audit trail.
    let outcome = &applied.outcome;
    metrics::counter!("floodgate_consumer_events_total", "outcome" => "changed")
        .increment(outcome.rows_written);
    metrics::counter!("floodgate_consumer_events_total", "outcome" => "unchanged")
        .increment(outcome.events_recorded.saturating_sub(outcome.rows_written));
    // Delivered again after they were applied (their audit entry was there): absorbed, and
    // rare: only a batch that set poison aside can be applied twice (see the crate's notes).
    metrics::counter!("floodgate_consumer_events_total", "outcome" => "repeated")
        .increment((events.len() as u64).saturating_sub(outcome.events_recorded));
    metrics::counter!("floodgate_consumer_rows_written_total").increment(outcome.rows_written);
    tracing::debug!(
        events = batch.len(),
        rows = outcome.rows_written,
        apply_ms = applying.elapsed().as_millis() as u64,
        "batch applied"
    );
    Some(Ok(()))
}

/// Sends each poison message to the dead-letter topic, retrying until it has it.
async fn set_aside(
    dead_letters: &DeadLetters,
    poison: &[(&OwnedMessage, String)],
    shutdown: &CancellationToken,
) -> Option<()> {
    for (message, reason) in poison {
        until_done(
            shutdown,
            || dead_letters.send(message, reason),
            |e| {
                tracing::warn!(error = %e, "dead-letter topic unreachable; retrying");
            },
        )
        .await?;
        metrics::counter!("floodgate_consumer_poison_total").increment(1);
        tracing::error!(%reason, partition = message.partition(), offset = message.offset(), topic = %dead_letters.topic(), "poison message sent to the dead-letter topic");
    }
    Some(())
}

/// Runs `attempt` until it succeeds, telling `failed` of each failure and waiting
/// [`RETRY_DELAY`] before the next; `None` if `shutdown` comes first. Nothing is committed past
/// an attempt that has not succeeded, so giving up at shutdown loses nothing.
async fn until_done<T, E, Attempt>(
    shutdown: &CancellationToken,
    mut attempt: impl FnMut() -> Attempt,
    failed: impl Fn(&E),
) -> Option<T>
where
    Attempt: std::future::Future<Output = Result<T, E>>,
{
    loop {
        match attempt().await {
            Ok(done) => return Some(done),
            Err(e) => failed(&e),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(RETRY_DELAY) => {}
        }
    }
}

/// The outcome of applying a batch, with the events that turned out to be poison.
struct Applied {
    outcome: store::BatchOutcome,
    /// Index into the batch's events, and why.
    poison: Vec<(usize, String)>,
}

/// Applies the batch and moves its offsets in one transaction. If that hits an event no retry
/// can apply (a constraint it violates), the events are applied one at a time instead, to set
/// exactly that one aside; the offsets are then moved by the caller, once the poison is set
/// aside. `Ok(Err(partition))`: this member no longer holds that partition.
async fn apply(
    db: &PgPool,
    events: &[store::Decoded],
    advance: &store::Advance<'_>,
) -> Result<Result<Applied, i32>, sqlx::Error> {
    match store::apply_batch(db, events, Some(advance)).await {
        Ok(outcome) => Ok(Ok(Applied {
            outcome,
            poison: Vec::new(),
        })),
        Err(store::ApplyError::Db(e)) => Err(e),
        Err(store::ApplyError::Fenced(partition)) => Ok(Err(partition)),
        Err(store::ApplyError::Poison(_)) => {
            let mut applied = Applied {
                outcome: store::BatchOutcome::default(),
                poison: Vec::new(),
            };
            for (index, event) in events.iter().enumerate() {
                match store::apply_batch(db, std::slice::from_ref(event), None).await {
                    Ok(one) => {
                        applied.outcome.rows_written += one.rows_written;
                        applied.outcome.events_recorded += one.events_recorded;
                    }
                    Err(store::ApplyError::Db(e)) => return Err(e),
                    Err(store::ApplyError::Poison(reason)) => applied.poison.push((index, reason)),
                    Err(store::ApplyError::Fenced(partition)) => return Ok(Err(partition)),
                }
            }
            Ok(Ok(applied))
        }
    }
}
