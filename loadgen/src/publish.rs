//! `floodgate-loadgen publish`: synthetic reservation events straight onto the topic, as fast
//! as the broker acknowledges them, with at most `--window` of them unacknowledged: with a large
//! window, the load of the consumer's benchmark; with a window of 50 and one pool, what the
//! booking service's producer does with 50 reservations in flight, alone, so its CPU per event
//! can be told apart from the rest of a reservation's (BENCHMARKS.md). The producer is
//! Floodgate's own, with its defaults and any `FLOODGATE_KAFKA_PRODUCER_<NAME>` setting.

use std::time::{Duration, Instant};

use anyhow::bail;
use floodgate_platform::kafka::{KafkaArgs, Role};
use floodgate_protocol::events::{Envelope, Event, ReservationData, SCHEMA_VERSION};
use futures::StreamExt;
use rdkafka::producer::{FutureProducer, FutureRecord};

use crate::report::Cpu;

#[derive(Clone, Debug, clap::Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[arg(long)]
    pub topic: String,
    /// Reservations; the events are 1.5 times as many.
    #[arg(long, default_value_t = 10_000)]
    pub reservations: u64,
    /// Pools the reservations spread over (the topic's partition keys).
    #[arg(long, default_value_t = 6)]
    pub pools: u64,
    /// Events sent and not yet acknowledged, at most.
    #[arg(long, default_value_t = 5_000)]
    pub window: usize,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// The synthetic sale's id.
const SALE: &str = "bench";

pub async fn publish(args: PublishArgs) -> anyhow::Result<()> {
    let brokers = &args.kafka.kafka_brokers;
    if !brokers
        .split(',')
        .all(|b| b.starts_with("127.") || b.starts_with("localhost"))
    {
        bail!("floodgate-loadgen only generates load on loopback addresses");
    }
    let producer: FutureProducer = args.kafka.client(Role::Producer, &[])?.create()?;
    let (window, topic) = (args.window.max(1), args.topic.as_str());
    let (started, cpu) = (Instant::now(), Cpu::now());
    let mut sent = 0u64;
    let mut pending = futures::stream::FuturesUnordered::new();
    for (key, payload) in events(args.reservations, args.pools.max(1)) {
        let (producer, topic) = (producer.clone(), topic.to_owned());
        pending.push(async move {
            producer
                .send(
                    FutureRecord::to(&topic).key(&key).payload(&payload),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| e)
        });
        if pending.len() >= window {
            if let Some(result) = pending.next().await {
                result?;
            }
        }
        sent += 1;
    }
    while let Some(result) = pending.next().await {
        result?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu.since();
    println!("published={sent} in {seconds:.1} s");
    if let Some(path) = args.json {
        let figures = serde_json::json!({
            "events": sent,
            "seconds": seconds,
            "events_per_second": sent as f64 / seconds.max(1e-9),
            "window": window,
            "pools": args.pools,
            "loadgen_cpu": cpu,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&figures)?)?;
    }
    Ok(())
}

/// `reservations` reservations spread over `pools` pools, every other one paid: each event's
/// message key and payload.
fn events(reservations: u64, pools: u64) -> impl Iterator<Item = (String, Vec<u8>)> {
    let now = floodgate_protocol::now_millis();
    (0..reservations).flat_map(move |i| {
        let pool = format!("pool{}", i % pools.max(1));
        let data = ReservationData {
            reservation_id: format!("{pool}~{i:032x}"),
            token_id: format!("t{i}"),
            ticket: i + 1,
            seats: 1,
            reserved_at_ms: now,
            hold_expires_at_ms: now + 300_000,
            payment_id: None,
            buyer: None,
        };
        let confirmed = (i % 2 == 0).then(|| Event::PaymentConfirmed(data.clone()));
        std::iter::once(Event::SeatReserved(data))
            .chain(confirmed)
            .map(move |event| {
                let envelope = Envelope {
                    v: SCHEMA_VERSION,
                    id: format!("{pool}~{i:032x}.{}", event.kind()),
                    at_ms: now,
                    sale: SALE.into(),
                    pool: pool.clone(),
                    seq: Some(i as i64 * 2 + 1 + i64::from(event.kind() != "SeatReserved")),
                    event,
                };
                let key = floodgate_platform::keys::pool_partition_key(SALE, &envelope.pool);
                (key, envelope.to_json())
            })
    })
}
