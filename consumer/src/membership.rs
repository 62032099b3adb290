//! The consumer group, kept in PostgreSQL: which instance reads which partition, and how far
//! each partition has been applied.
//!
//! Why not Kafka's group coordinator: the offsets must move in the same transaction as the rows
//! they produced, or a member that lost a partition (killed, or stalled past its session) can
//! commit an old offset after its successor moved on, and a killed member's last batch is
//! applied twice. And the broker this runs on here (Tansu 0.6) does not settle a group of more
//! than one member (see docs/runbook.md, "The consumer"). So the group lives next to the data:
//!
//! - Every member renews its row in `consumer_members` each round (a third of the session
//!   timeout); a row older than the session is a dead member, removed by the next live one.
//! - The live members, sorted by id, split the partitions: member `i` of `n` holds
//!   `p / n + (i < p % n)` of the `p` partitions. A member over its share gives partitions back;
//!   one under it claims free partitions and those whose lease lapsed, bumping each one's epoch.
//! - A batch's transaction advances the offsets of its partitions only where this member still
//!   holds them with the epoch it claimed ([`Fence`]); otherwise the whole batch rolls back and
//!   the member rebalances. A member reads a partition from the offset stored here, so what it
//!   takes over starts exactly after the last batch its predecessor committed.
//! - A member's id is `<instance id>/<run id>`. Instance ids are unique per instance, so a
//!   restarted instance knows its earlier runs are dead and takes their partitions at once.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sqlx::PgPool;

/// A partition this member holds: the epoch it claimed it with, and where to read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub epoch: i64,
    /// The next offset to apply; `None`: nothing applied yet (read from the start).
    pub next_offset: Option<i64>,
}

/// What a batch's transaction checks before it commits: this member, and the epoch of each
/// partition it holds.
#[derive(Clone, Debug)]
pub struct Fence {
    pub group: String,
    pub topic: String,
    pub member: String,
    pub epochs: HashMap<i32, i64>,
}

/// This process in its group.
pub struct Membership {
    db: PgPool,
    group: String,
    topic: String,
    instance: String,
    member: String,
    session: Duration,
    owned: BTreeMap<i32, Lease>,
}

impl Membership {
    /// This process as a member of `group` reading `topic`; `instance` names the instance
    /// (stable across restarts; a random one when none is configured).
    pub fn new(
        db: PgPool,
        group: &str,
        topic: &str,
        instance: Option<&str>,
        session: Duration,
    ) -> Self {
        let run = format!("{:08x}", rand::random::<u32>());
        let instance = instance.map_or_else(|| format!("c-{run}"), str::to_owned);
        Self {
            db,
            group: group.to_owned(),
            topic: topic.to_owned(),
            member: format!("{instance}/{run}"),
            instance,
            session,
            owned: BTreeMap::new(),
        }
    }

    /// How often a member takes its round: well inside the session, so one late round never
    /// costs the partitions.
    pub fn interval(&self) -> Duration {
        (self.session / 3).clamp(Duration::from_millis(100), Duration::from_secs(3))
    }

    pub fn owned(&self) -> &BTreeMap<i32, Lease> {
        &self.owned
    }

    pub fn fence(&self) -> Fence {
        Fence {
            group: self.group.clone(),
            topic: self.topic.clone(),
            member: self.member.clone(),
            epochs: self.owned.iter().map(|(p, l)| (*p, l.epoch)).collect(),
        }
    }

    /// One round: renews this member and its leases, forgets dead members, and gives back or
    /// takes partitions until it holds its share of `partitions`. Returns whether the
    /// partitions it holds changed.
    pub async fn rebalance(&mut self, partitions: i32) -> sqlx::Result<bool> {
        let mut tx = self.db.begin().await?;
        let members = self.renew_membership(&mut tx, partitions).await?;
        let target = share(&members, &self.member, partitions);
        let mut held = self.renew_leases(&mut tx).await?;
        if held.len() > target {
            // Give back the highest: the members still short take them at their next round.
            let extra: Vec<i32> = held
                .keys()
                .rev()
                .take(held.len() - target)
                .copied()
                .collect();
            self.give_back(&mut tx, &extra).await?;
            held.retain(|p, _| !extra.contains(p));
        } else if held.len() < target {
            held.extend(self.claim(&mut tx, target - held.len(), partitions).await?);
        }
        tx.commit().await?;
        let changed = held.keys().ne(self.owned.keys())
            || held
                .iter()
                .any(|(p, l)| self.owned.get(p).is_some_and(|o| o.epoch != l.epoch));
        self.owned = held;
        Ok(changed)
    }

    fn session_ms(&self) -> i64 {
        self.session.as_millis() as i64
    }

    /// Renews this member, forgets the dead ones (silent for a session, or earlier runs of this
    /// very instance, whose partitions are freed), makes sure every partition has its row, and
    /// returns the live members, sorted.
    async fn renew_membership(
        &self,
        tx: &mut sqlx::PgConnection,
        partitions: i32,
    ) -> sqlx::Result<Vec<String>> {
        sqlx::query(
            "insert into consumer_members (group_id, member_id, seen_at) values ($1, $2, now())
             on conflict (group_id, member_id) do update set seen_at = now()",
        )
        .bind(&self.group)
        .bind(&self.member)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "delete from consumer_members where group_id = $1
             and (seen_at < now() - $2 * interval '1 millisecond'
                  or (left(member_id, length($3) + 1) = $3 || '/' and member_id <> $4))",
        )
        .bind(&self.group)
        .bind(self.session_ms())
        .bind(&self.instance)
        .bind(&self.member)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "insert into consumer_partitions (group_id, topic, kafka_partition)
             select $1, $2, generate_series(0, $3 - 1) on conflict do nothing",
        )
        .bind(&self.group)
        .bind(&self.topic)
        .bind(partitions)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "update consumer_partitions set owner = null, lease_until = null
             where group_id = $1 and topic = $2
             and left(owner, length($3) + 1) = $3 || '/' and owner <> $4",
        )
        .bind(&self.group)
        .bind(&self.topic)
        .bind(&self.instance)
        .bind(&self.member)
        .execute(&mut *tx)
        .await?;
        sqlx::query_scalar(
            "select member_id from consumer_members where group_id = $1 order by member_id",
        )
        .bind(&self.group)
        .fetch_all(&mut *tx)
        .await
    }

    /// Extends the leases this member still holds (one taken over is not among them).
    async fn renew_leases(
        &self,
        tx: &mut sqlx::PgConnection,
    ) -> sqlx::Result<BTreeMap<i32, Lease>> {
        let rows = sqlx::query_as(
            "update consumer_partitions set lease_until = now() + $4 * interval '1 millisecond'
             where group_id = $1 and topic = $2 and owner = $3
             returning kafka_partition, epoch, next_offset",
        )
        .bind(&self.group)
        .bind(&self.topic)
        .bind(&self.member)
        .bind(self.session_ms())
        .fetch_all(&mut *tx)
        .await?;
        Ok(leases(rows))
    }

    async fn give_back(&self, tx: &mut sqlx::PgConnection, partitions: &[i32]) -> sqlx::Result<()> {
        sqlx::query(
            "update consumer_partitions set owner = null, lease_until = null
             where group_id = $1 and topic = $2 and owner = $3 and kafka_partition = any($4)",
        )
        .bind(&self.group)
        .bind(&self.topic)
        .bind(&self.member)
        .bind(partitions)
        .execute(&mut *tx)
        .await?;
        Ok(())
    }

    /// Claims up to `wanted` partitions that are free or whose lease lapsed, bumping each one's
    /// epoch (its former holder can no longer commit for it).
    async fn claim(
        &self,
        tx: &mut sqlx::PgConnection,
        wanted: usize,
        partitions: i32,
    ) -> sqlx::Result<BTreeMap<i32, Lease>> {
        let rows = sqlx::query_as(
            "update consumer_partitions
             set owner = $3, epoch = epoch + 1, lease_until = now() + $5 * interval '1 millisecond'
             where (group_id, topic, kafka_partition) in (
               select group_id, topic, kafka_partition from consumer_partitions
               where group_id = $1 and topic = $2 and kafka_partition < $6
               and (owner is null or lease_until < now())
               order by kafka_partition limit $4 for update skip locked)
             returning kafka_partition, epoch, next_offset",
        )
        .bind(&self.group)
        .bind(&self.topic)
        .bind(&self.member)
        .bind(wanted as i64)
        .bind(self.session_ms())
        .bind(partitions)
        .fetch_all(&mut *tx)
        .await?;
        Ok(leases(rows))
    }

    /// Gives back every partition and leaves the group (at shutdown): the others take them at
    /// their next round instead of waiting for the lease to lapse.
    pub async fn leave(&mut self) -> sqlx::Result<()> {
        sqlx::query(
            "update consumer_partitions set owner = null, lease_until = null
             where group_id = $1 and topic = $2 and owner = $3",
        )
        .bind(&self.group)
        .bind(&self.topic)
        .bind(&self.member)
        .execute(&self.db)
        .await?;
        sqlx::query("delete from consumer_members where group_id = $1 and member_id = $2")
            .bind(&self.group)
            .bind(&self.member)
            .execute(&self.db)
            .await?;
        self.owned.clear();
        Ok(())
    }
}

fn leases(rows: Vec<(i32, i64, Option<i64>)>) -> BTreeMap<i32, Lease> {
    rows.into_iter()
        .map(|(partition, epoch, next_offset)| (partition, Lease { epoch, next_offset }))
        .collect()
}

/// How many of `partitions` the member `me` holds among `members` (sorted): the first
/// `partitions % n` members one more than the others, so the shares add up to `partitions`.
pub fn share(members: &[String], me: &str, partitions: i32) -> usize {
    let partitions = partitions.max(0) as usize;
    let Some(index) = members.iter().position(|m| m == me) else {
        return 0;
    };
    let n = members.len();
    partitions / n + usize::from(index < partitions % n)
}

/// Advances `partition`'s stored offset to `next` inside `tx`, if this member still holds it
/// with the epoch it claimed. `false`: it does not (the batch must roll back).
pub async fn advance(
    tx: &mut sqlx::PgConnection,
    fence: &Fence,
    partition: i32,
    next: i64,
) -> sqlx::Result<bool> {
    let Some(epoch) = fence.epochs.get(&partition) else {
        return Ok(false);
    };
    let moved = sqlx::query(
        "update consumer_partitions set next_offset = greatest(coalesce(next_offset, 0), $6)
         where group_id = $1 and topic = $2 and kafka_partition = $3 and owner = $4 and epoch = $5",
    )
    .bind(&fence.group)
    .bind(&fence.topic)
    .bind(partition)
    .bind(&fence.member)
    .bind(epoch)
    .bind(next)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(moved == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for n in 1..=7usize {
            let members: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
            for partitions in 0..=13 {
                let shares: Vec<usize> = members
                    .iter()
                    .map(|m| share(&members, m, partitions))
                    .collect();
                assert_eq!(
                    shares.iter().sum::<usize>(),
                    partitions as usize,
                    "{shares:?}"
                );
                let (min, max) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                assert!(max - min <= 1, "{n} members, {partitions}: {shares:?}");
            }
        }
        // Six partitions: two members take three each, three take two each.
        let two = ["a".to_owned(), "b".to_owned()];
        assert_eq!(share(&two, "b", 6), 3);
        let three = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        assert_eq!(share(&three, "c", 6), 2);
        // A member not (yet) in the list holds nothing.
        assert_eq!(share(&two, "z", 6), 0);
    }
}
