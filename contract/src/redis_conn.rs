//! One handle on Floodgate's Redis, whether it is a single server or a Redis Cluster: every
//! service talks through [`RedisConn`], and since every script and every pipeline keeps to one
//! hash slot (contract/src/keys.rs), the two deployments run one code path. Reads that need
//! several slots (a sale's pools, say) are several pipelines run at once
//! ([`crate::state::PoolCounts::read_each`]), never one pipeline across slots.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// A reconnecting, multiplexed connection to a single Redis or to a Redis Cluster. Cheap to
/// clone: clones share the connection.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    /// Commands go to the primary of their key's slot; the client follows `MOVED` and
    /// failovers by itself.
    Cluster(ClusterConnection),
}

/// How long a connection attempt and a reply may take: short on purpose, so a booking request
/// that cannot reach Redis fails fast with 503 (fail closed) instead of holding a client for
/// the length of a TCP timeout.
const TIMEOUT: Duration = Duration::from_secs(2);

impl RedisConn {
    /// Connects to the single Redis at `url`.
    pub async fn single(url: &str) -> redis::RedisResult<Self> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(TIMEOUT)
            .set_response_timeout(TIMEOUT)
            .set_number_of_retries(2)
            .set_max_delay(500);
        Ok(Self::Single(
            ConnectionManager::new_with_config(client, config).await?,
        ))
    }

    /// Connects to the Redis Cluster that `seeds` (`redis://host:port` each) belong to.
    pub async fn cluster(seeds: &[String]) -> redis::RedisResult<Self> {
        let client = ClusterClientBuilder::new(seeds.to_vec())
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .retries(3)
            .build()?;
        Ok(Self::Cluster(client.get_async_connection().await?))
    }

    /// Whether this is a cluster (some operations are routed by hand there).
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
