//! One handle on Floodgate's Redis, whether it is a single server or a Redis Cluster: every
//! service talks through [`RedisConn`], and since every script and every pipeline keeps to one
//! hash slot (platform/src/keys.rs), the two deployments run one code path. Reads that need
//! several slots (a sale's pools, say) are several pipelines run at once
//! ([`crate::state::PoolCounts::read_each`]), never one pipeline across slots.

use std::path::PathBuf;
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
    /// Connects to the single Redis at `url` (`rediss://` for TLS, verified against `tls`'s CA
    /// or the system's roots).
    pub async fn single(url: &str, tls: &RedisTls) -> redis::RedisResult<Self> {
        let client = match tls.certificates(&[url])? {
            Some(certs) => redis::Client::build_with_tls(url, certs)?,
            None => redis::Client::open(url)?,
        };
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(TIMEOUT)
            .set_response_timeout(TIMEOUT)
            .set_number_of_retries(2)
            .set_max_delay(500);
        Ok(Self::Single(
            ConnectionManager::new_with_config(client, config).await?,
        ))
    }

    /// Connects to the Redis Cluster that `seeds` (`redis://host:port` each, or all
    /// `rediss://` for TLS) belong to. The nodes found from them are reached the same way.
    pub async fn cluster(seeds: &[String], tls: &RedisTls) -> redis::RedisResult<Self> {
        let urls: Vec<&str> = seeds.iter().map(String::as_str).collect();
        let mut builder = ClusterClientBuilder::new(seeds.to_vec())
            .connection_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
            .retries(3);
        if let Some(certs) = tls.certificates(&urls)? {
            builder = builder.certs(certs);
        }
        let client = builder.build()?;
        Ok(Self::Cluster(client.get_async_connection().await?))
    }

    /// Whether this is a cluster (some operations are routed by hand there).
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

/// How a `rediss://` connection checks the server and, if asked, shows a certificate of its own:
/// PEM files, read when connecting. Without a CA file the system's roots are used.
#[derive(Clone, Debug, Default)]
pub struct RedisTls {
    /// The CA certificates the server's certificate must chain to.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key, for a server that requires one (`tls-auth-clients`).
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
}

impl RedisTls {
    /// The certificates for `urls`, or `None` when none of them is `rediss://`. TLS files given
    /// for a plaintext URL, a mix of the two schemes, a half client identity, or the client's
    /// `#insecure` (which skips verification) are refused: each would quietly mean less
    /// security than the operator asked for.
    fn certificates(&self, urls: &[&str]) -> redis::RedisResult<Option<redis::TlsCertificates>> {
        let refuse = |what: String| {
            redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "TLS", what))
        };
        let tls = urls.iter().filter(|u| u.starts_with("rediss://")).count();
        let files = self.ca_file.is_some()
            || self.client_cert_file.is_some()
            || self.client_key_file.is_some();
        if tls == 0 {
            return if files {
                Err(refuse(
                    "Redis TLS files are set but the Redis URL is not rediss://".into(),
                ))
            } else {
                Ok(None)
            };
        }
        if tls != urls.len() {
            return Err(refuse("every Redis URL must be rediss:// or none".into()));
        }
        if urls.iter().any(|u| u.contains("#insecure")) {
            return Err(refuse(
                "#insecure turns off certificate verification; give the CA file instead".into(),
            ));
        }
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| refuse(format!("cannot read {}: {e}", path.display())))
        };
        let client_tls = match (&self.client_cert_file, &self.client_key_file) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert)?,
                client_key: read(key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(refuse(
                    "a client certificate needs its key, and a key its certificate".into(),
                ))
            }
        };
        let root_cert = self.ca_file.as_ref().map(read).transpose()?;
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// Every request through a [`RedisConn`] is timed: a script by its name
/// (`floodgate_redis_script_duration_seconds`), anything else by its command, a pipeline as
/// `PIPELINE` (`floodgate_redis_command_duration_seconds`), errors and timeouts included.
impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let timer = crate::telemetry::redis_timer(cmd);
        let started = std::time::Instant::now();
        let request = match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        };
        Box::pin(async move {
            let reply = request.await;
            timer.record(started.elapsed().as_secs_f64());
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let timer = crate::telemetry::pipeline_timer();
        let started = std::time::Instant::now();
        let request = match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        };
        Box::pin(async move {
            let replies = request.await;
            timer.record(started.elapsed().as_secs_f64());
            replies
        })
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
