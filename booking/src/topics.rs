//! `floodgate-booking topics ensure`: the reservations topic, its dead-letter topic and the
//! booking service's probe topic (a broker known to be down is probed there,
//! `crate::broker_health`), made by Floodgate itself through Kafka's admin API (any broker:
//! Kafka, Redpanda, Tansu), with the partitions and replication the settings ask for. A topic that
//! exists is checked, never changed.
//!
//! The settings' partitions and replicas are a floor. A topic with more partitions than they ask
//! for is as set: an operator grows a topic with the broker's own tools, between sales (raising
//! the count moves pools' events to other partitions, and their order per pool is what the
//! consumer relies on: docs/deploy.md, "Growing the topic"), and the Pods of a release whose
//! settings still name the old count must go on starting. One with fewer is reported and left as
//! it is, and the command still succeeds: the topic works as it is (each pool's events keep their
//! one partition), and a Pod added at a sale's opening must never wait on a count an operator
//! raised in the settings before growing the topic. Fewer replicas than asked is a difference
//! that fails the command: an acknowledged event would survive less than the settings promise.

use std::time::Duration;

use anyhow::Context as _;
use floodgate_platform::kafka::{KafkaArgs, Role};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

/// How the topics must be.
#[derive(Clone, Debug, clap::Args)]
pub struct TopicSettings {
    /// Partitions of the reservations topic: the most consumer instances that can share the
    /// work, and the spread of pools over the brokers.
    #[arg(long, env = "FLOODGATE_TOPIC_PARTITIONS", default_value_t = 6)]
    pub partitions: i32,
    /// Partitions of the dead-letter topic (it takes a poison message now and then).
    #[arg(long, env = "FLOODGATE_DLQ_PARTITIONS", default_value_t = 1)]
    pub dlq_partitions: i32,
    /// Copies of each partition. 1 is for a single local broker only: production needs 3, so
    /// an acknowledged event survives the loss of a broker.
    #[arg(long, env = "FLOODGATE_TOPIC_REPLICATION_FACTOR", default_value_t = 1)]
    pub replication_factor: i32,
    /// `min.insync.replicas` of new topics (with `acks=all`, how many copies an event must be on
    /// before it is acknowledged): 2 with a replication factor of 3. Unset: the broker's default.
    #[arg(long, env = "FLOODGATE_TOPIC_MIN_INSYNC_REPLICAS")]
    pub min_insync_replicas: Option<i32>,
}

/// What `ensure` found or did for one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicState {
    Created,
    /// As the settings say, or with more partitions or replicas than they ask for.
    AsSet,
    /// Fewer partitions than the settings ask for: what to do, for a person to decide. The
    /// topic serves as it is.
    Fewer(String),
    /// Exists, but not as the settings say: each difference, for a person to decide.
    Differs(Vec<String>),
}

/// One topic as it must be.
struct Wanted<'a> {
    name: &'a str,
    partitions: i32,
}

/// The probe topic's name: `given`, else the reservations topic's with `.probe`.
pub fn probe_topic(kafka: &KafkaArgs, given: Option<&str>) -> String {
    given.map_or_else(
        || format!("{}.probe", kafka.reservations_topic),
        str::to_owned,
    )
}

/// Creates the reservations topic, its dead-letter topic and the probe topic where missing, and
/// checks those that exist. Returns each topic's state, in that order.
pub async fn ensure(
    kafka: &KafkaArgs,
    (dlq_topic, probe_topic): (&str, &str),
    settings: &TopicSettings,
) -> anyhow::Result<Vec<(String, TopicState)>> {
    anyhow::ensure!(
        settings.partitions > 0 && settings.dlq_partitions > 0 && settings.replication_factor > 0,
        "partitions and the replication factor must be at least 1"
    );
    let topic = kafka.reservations_topic.as_str();
    let admin: AdminClient<DefaultClientContext> = kafka
        .client(Role::Admin, &[])?
        .create()
        .context("creating the Kafka admin client")?;
    let mut states = Vec::new();
    for wanted in [
        Wanted {
            name: topic,
            partitions: settings.partitions,
        },
        Wanted {
            name: dlq_topic,
            partitions: settings.dlq_partitions,
        },
        // A few small records a second at most, and only while the broker is down.
        Wanted {
            name: probe_topic,
            partitions: 1,
        },
    ] {
        let state = match existing(&admin, wanted.name).await? {
            Some(found) => compare(&found, &wanted, settings),
            None => create(&admin, &wanted, settings).await?,
        };
        states.push((wanted.name.to_owned(), state));
    }
    Ok(states)
}

/// [`ensure`], with a line per topic on standard output (and each difference under it). False
/// if a topic differs from the settings (fewer partitions is not a difference that fails: see
/// the module's note).
pub async fn ensure_and_report(
    kafka: &KafkaArgs,
    others: (&str, &str),
    settings: &TopicSettings,
) -> anyhow::Result<bool> {
    let mut as_set = true;
    for (name, state) in ensure(kafka, others, settings).await? {
        match state {
            TopicState::Created => println!("topic {name}: created"),
            TopicState::AsSet => println!("topic {name}: as set"),
            TopicState::Fewer(note) => println!("topic {name}: {note}"),
            TopicState::Differs(differences) => {
                as_set = false;
                println!("topic {name}: differs from the settings (left as it is):");
                differences.iter().for_each(|d| println!("  {d}"));
            }
        }
    }
    Ok(as_set)
}

/// A topic as the broker describes it: its partitions and each one's number of replicas.
struct Found {
    partitions: i32,
    replicas: Vec<usize>,
}

async fn existing(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
) -> anyhow::Result<Option<Found>> {
    let metadata = admin
        .inner()
        .fetch_metadata(Some(name), Duration::from_secs(10))
        .context("reading the broker's metadata")?;
    let Some(topic) = metadata.topics().iter().find(|t| t.name() == name) else {
        return Ok(None);
    };
    if topic.error().is_some() || topic.partitions().is_empty() {
        return Ok(None);
    }
    Ok(Some(Found {
        partitions: topic.partitions().len() as i32,
        replicas: topic
            .partitions()
            .iter()
            .map(|p| p.replicas().len())
            .collect(),
    }))
}

fn compare(found: &Found, wanted: &Wanted<'_>, settings: &TopicSettings) -> TopicState {
    let want = settings.replication_factor as usize;
    let mut differences = Vec::new();
    if let Some(replicas) = found.replicas.iter().find(|r| **r < want) {
        differences.push(format!(
            "a partition has {replicas} replica(s), the settings ask for {want}"
        ));
    }
    let fewer = (found.partitions < wanted.partitions).then(|| {
        format!(
            "{} partitions, the settings ask for {}",
            found.partitions, wanted.partitions
        )
    });
    match fewer {
        _ if !differences.is_empty() => {
            differences.extend(fewer);
            TopicState::Differs(differences)
        }
        Some(fewer) => TopicState::Fewer(format!(
            "{fewer}: left as it is, and serving; grow it between sales \
             (docs/deploy.md, \"Growing the topic\")"
        )),
        None => TopicState::AsSet,
    }
}

async fn create(
    admin: &AdminClient<DefaultClientContext>,
    wanted: &Wanted<'_>,
    settings: &TopicSettings,
) -> anyhow::Result<TopicState> {
    let min_insync = settings.min_insync_replicas.map(|n| n.to_string());
    let mut topic = NewTopic::new(
        wanted.name,
        wanted.partitions,
        TopicReplication::Fixed(settings.replication_factor),
    );
    if let Some(n) = &min_insync {
        topic = topic.set("min.insync.replicas", n);
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for result in admin.create_topics(&[topic], &options).await? {
        match result {
            Ok(_) => {}
            // Made by someone else meanwhile: it is there; the next run checks it.
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, e)) => anyhow::bail!("creating topic {name}: {e}"),
        }
    }
    Ok(TopicState::Created)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(partitions: i32, replication_factor: i32) -> TopicSettings {
        TopicSettings {
            partitions,
            dlq_partitions: 1,
            replication_factor,
            min_insync_replicas: None,
        }
    }

    #[test]
    fn an_existing_topic_is_compared_with_the_settings_as_a_floor() {
        let wanted = Wanted {
            name: "t",
            partitions: 6,
        };
        let found = |partitions: i32, replicas: usize| Found {
            partitions,
            replicas: vec![replicas; partitions as usize],
        };
        assert_eq!(
            compare(&found(6, 3), &wanted, &settings(6, 3)),
            TopicState::AsSet
        );
        // Grown by an operator, or with more copies than asked: as set.
        assert_eq!(
            compare(&found(12, 3), &wanted, &settings(6, 3)),
            TopicState::AsSet
        );
        assert_eq!(
            compare(&found(6, 5), &wanted, &settings(6, 3)),
            TopicState::AsSet
        );
        // Fewer partitions: reported, not a failure.
        let TopicState::Fewer(note) = compare(&found(3, 3), &wanted, &settings(6, 3)) else {
            panic!("fewer partitions is not a failure");
        };
        assert!(
            note.starts_with("3 partitions, the settings ask for 6: left as it is"),
            "{note}"
        );
        // Fewer replicas: a difference, with the partitions' named too.
        let TopicState::Differs(differences) = compare(&found(3, 1), &wanted, &settings(6, 3))
        else {
            panic!("fewer replicas matched");
        };
        assert_eq!(
            differences,
            [
                "a partition has 1 replica(s), the settings ask for 3",
                "3 partitions, the settings ask for 6"
            ]
        );
    }
}
