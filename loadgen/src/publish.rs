//! `floodgate-loadgen publish`: synthetic reservation events straight onto the topic, as fast
//! as the broker acknowledges them, to measure the consumer alone (BENCHMARKS.md).

use std::time::{Duration, Instant};

use anyhow::bail;
use floodgate_contract::events::{Envelope, Event, ReservationData, SCHEMA_VERSION};
use futures::StreamExt;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// Sends awaiting the broker's acknowledgement at once.
const WINDOW: usize = 5_000;

/// The synthetic sale's id.
const SALE: &str = "bench";

pub async fn publish(
    brokers: &str,
    topic: &str,
    reservations: u64,
    pools: u64,
    json: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    if !brokers
        .split(',')
        .all(|b| b.starts_with("127.") || b.starts_with("localhost"))
    {
        bail!("floodgate-loadgen only generates load on loopback addresses");
    }
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "20")
        .create()?;
    let started = Instant::now();
    let mut sent = 0u64;
    let mut pending = futures::stream::FuturesUnordered::new();
    for (key, payload) in events(reservations, pools) {
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
        if pending.len() >= WINDOW {
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
    println!("published={sent} in {seconds:.1} s");
    if let Some(path) = json {
        let figures = serde_json::json!({
            "events": sent,
            "seconds": seconds,
            "events_per_second": sent as f64 / seconds.max(1e-9),
            "window": WINDOW,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&figures)?)?;
    }
    Ok(())
}

/// `reservations` reservations spread over `pools` pools, every other one paid: each event's
/// message key and payload.
fn events(reservations: u64, pools: u64) -> impl Iterator<Item = (String, Vec<u8>)> {
    let now = floodgate_contract::now_millis();
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
                let key = floodgate_contract::keys::pool_partition_key(SALE, &envelope.pool);
                (key, envelope.to_json())
            })
    })
}
