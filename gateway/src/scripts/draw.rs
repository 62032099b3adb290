//! The pre-queue's record as the draw endpoints read it: the nonce list, and the batches of
//! joins (`<first>:<count>:<root>:<chain>` members of a sorted set, written by `lua/join.lua`).

use floodgate_platform::keys::SaleKeys;
use floodgate_platform::runtime::RedisConn;
use floodgate_platform::state::{SaleMeta, SaleStatus};
use redis::RedisResult;

/// One recorded batch of pre-queue joins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinBatch {
    pub first: u64,
    pub count: u64,
    /// Merkle root (hex) of its nonces.
    pub root: String,
    /// The pre-queue's chain after it (hex).
    pub chain: String,
}

impl JoinBatch {
    /// A sorted-set member; `None` if it is damaged.
    fn parse(member: &str) -> Option<Self> {
        let mut parts = member.splitn(4, ':');
        let first = parts.next()?.parse().ok()?;
        let count = parts.next()?.parse().ok()?;
        let root = parts.next()?.to_owned();
        let chain = parts.next()?.to_owned();
        (count > 0).then_some(JoinBatch {
            first,
            count,
            root,
            chain,
        })
    }

    /// Its last ticket.
    pub fn last(&self) -> u64 {
        self.first + self.count - 1
    }
}

/// A read of the pre-queue: whether the sale is armed and the pre-queue closed, and what was
/// asked for.
pub struct Read<T> {
    pub status: SaleStatus,
    pub found: T,
}

/// The sale's meta and the tickets handed out so far.
pub async fn meta_and_issued(
    conn: &mut RedisConn,
    keys: &SaleKeys,
) -> RedisResult<(Option<SaleMeta>, u64)> {
    let mut pipe = redis::pipe();
    SaleMeta::query(&mut pipe, keys);
    let (meta, issued): (Vec<Option<String>>, Option<u64>) =
        pipe.get(keys.seq()).query_async(conn).await?;
    Ok((SaleMeta::from_fields(&meta), issued.unwrap_or(0)))
}

/// The nonces of tickets `first..=last` (1-based), with the sale's status.
pub async fn nonces(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    first: u64,
    last: u64,
) -> RedisResult<Read<Vec<String>>> {
    let mut pipe = redis::pipe();
    SaleStatus::query(&mut pipe, keys);
    let (armed, closed, nonces): (bool, bool, Vec<String>) = pipe
        .lrange(keys.prequeue(), list_index(first), list_index(last))
        .query_async(conn)
        .await?;
    Ok(Read {
        status: SaleStatus::from_replies((armed, closed)),
        found: nonces,
    })
}

/// Batches `from..from+count` (1-based, in ticket order); `None` for a damaged one.
pub async fn batches(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    from: u64,
    count: u64,
) -> RedisResult<Read<Vec<Option<JoinBatch>>>> {
    let mut pipe = redis::pipe();
    SaleStatus::query(&mut pipe, keys);
    let (armed, closed, members): (bool, bool, Vec<String>) = pipe
        .zrange(
            keys.prequeue_batches(),
            list_index(from),
            list_index(from + count - 1),
        )
        .query_async(conn)
        .await?;
    Ok(Read {
        status: SaleStatus::from_replies((armed, closed)),
        found: members.iter().map(|m| JoinBatch::parse(m)).collect(),
    })
}

/// The batch holding `ticket` (the last one starting at or before it) and the one before it,
/// whose chain the batch extended: `(batch, previous)`; `None` inside for a damaged one.
pub async fn batch_of(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    ticket: u64,
) -> RedisResult<Read<Vec<Option<JoinBatch>>>> {
    let mut pipe = redis::pipe();
    SaleStatus::query(&mut pipe, keys);
    let (armed, closed, around): (bool, bool, Vec<String>) = pipe
        .cmd("ZREVRANGEBYSCORE")
        .arg(keys.prequeue_batches())
        .arg(ticket)
        .arg("-inf")
        .arg("LIMIT")
        .arg(0)
        .arg(2)
        .query_async(conn)
        .await?;
    Ok(Read {
        status: SaleStatus::from_replies((armed, closed)),
        found: around.iter().map(|m| JoinBatch::parse(m)).collect(),
    })
}

/// The nonces of tickets `first..=last` alone.
pub async fn nonce_range(
    conn: &mut RedisConn,
    keys: &SaleKeys,
    first: u64,
    last: u64,
) -> RedisResult<Vec<String>> {
    redis::cmd("LRANGE")
        .arg(keys.prequeue())
        .arg(list_index(first))
        .arg(list_index(last))
        .query_async(conn)
        .await
}

/// Ticket `n`'s index in the nonce list (and batch `n`'s in the batch set): the callers check
/// that `n` is from 1 to `i64::MAX`, so it fits Redis' signed index.
fn list_index(n: u64) -> isize {
    (n - 1) as isize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_records_parse() {
        assert_eq!(
            JoinBatch::parse("3:2:ab:cd"),
            Some(JoinBatch {
                first: 3,
                count: 2,
                root: "ab".into(),
                chain: "cd".into()
            })
        );
        assert_eq!(JoinBatch::parse("3:2:ab:cd").unwrap().last(), 4);
        for bad in ["", "3:2:ab", "x:2:ab:cd", "3:0:ab:cd"] {
            assert_eq!(JoinBatch::parse(bad), None, "{bad}");
        }
    }
}
