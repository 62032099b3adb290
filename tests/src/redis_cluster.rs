//! A private Redis Cluster (three primaries, three replicas, `deploy/stack.sh cluster-up` on free
//! loopback ports) for a test that kills its nodes: never the cluster other tests share.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::eventually;

pub struct PrivateCluster {
    first: u16,
    /// Seed nodes, `redis://127.0.0.1:<port>`.
    pub seeds: Vec<String>,
}

fn stack(args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/stack.sh");
    let output = Command::new(script).args(args).output().expect("stack.sh");
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "stack.sh {args:?}: {said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    said
}

fn free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn home() -> PathBuf {
    crate::floodgate_home()
}

impl PrivateCluster {
    /// Starts a cluster on six free consecutive ports (and their cluster bus ports, +10000).
    /// Both lie below 32768, where the kernel hands out ephemeral ports (net.ipv4.
    /// ip_local_port_range): a port free when it was picked cannot then be taken by some
    /// client's connection before the node binds it (clusters failed to form that way when
    /// several ran at once).
    pub fn start() -> Self {
        let seed = std::process::id() as u16 % 900;
        let first = (0..900u16)
            .map(|i| 12_000 + ((seed + i) % 900) * 10)
            .find(|&p| (p..p + 6).all(|q| free(q) && free(q + 10_000)))
            .expect("six free ports");
        let said = stack(&["cluster-up", &first.to_string()]);
        let seeds = said
            .lines()
            .last()
            .unwrap_or_default()
            .split(',')
            .map(str::to_owned)
            .collect();
        Self { first, seeds }
    }

    /// The port of the primary serving `key`'s slot now, as the first node that answers sees it.
    pub async fn primary(&self, key: &str) -> u16 {
        for port in self.first..self.first + 6 {
            if let Some(primary) = self.primary_of(key, port).await {
                return primary;
            }
        }
        panic!("no node of the cluster answers")
    }

    /// The port of the primary serving `key`'s slot now, as the node at `ask` sees it.
    async fn primary_of(&self, key: &str, ask: u16) -> Option<u16> {
        let mut node = redis::Client::open(format!("redis://127.0.0.1:{ask}"))
            .ok()?
            .get_multiplexed_async_connection()
            .await
            .ok()?;
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut node)
            .await
            .ok()?;
        let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut node)
            .await
            .ok()?;
        ranges.into_iter().find_map(|range| {
            let first: u16 = redis::from_redis_value(&range[0]).ok()?;
            let last: u16 = redis::from_redis_value(&range[1]).ok()?;
            let primary: Vec<redis::Value> = redis::from_redis_value(&range[2]).ok()?;
            (first..=last)
                .contains(&slot)
                .then(|| redis::from_redis_value(&primary[1]).ok())
                .flatten()
        })
    }

    /// `kill -9` of the node on `port`: no shutdown, no last write to its files.
    pub fn kill(&self, port: u16) {
        self.signal(port, "KILL");
    }

    /// The port of `primary`'s replica (`INFO replication`).
    pub async fn replica_of(&self, primary: u16) -> u16 {
        let mut node = redis::Client::open(format!("redis://127.0.0.1:{primary}"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut node)
            .await
            .unwrap();
        info.lines()
            .find(|l| l.starts_with("slave0:"))
            .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("port=")))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("{primary} has no replica: {info}"))
    }

    /// Sends `signal` (`STOP`, `CONT`, `KILL`) to the node on `port`.
    pub fn signal(&self, port: u16, signal: &str) {
        let pidfile = home()
            .join(format!("redis-cluster-{}", self.first))
            .join(port.to_string())
            .join("redis.pid");
        let pid = std::fs::read_to_string(&pidfile).expect("the node's pid file");
        let status = Command::new("kill")
            .args([&format!("-{signal}"), pid.trim()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Waits until another node serves `key`'s slot than `dead`, as a surviving node sees it.
    pub async fn failed_over(&self, key: &str, dead: u16) -> u16 {
        let alive = (self.first..self.first + 6)
            .find(|&p| p != dead)
            .expect("a surviving node");
        eventually("a replica is promoted", Duration::from_secs(30), || async {
            self.primary_of(key, alive).await.is_some_and(|p| p != dead)
        })
        .await;
        self.primary_of(key, alive).await.expect("a primary")
    }

    /// Restarts the node on `port` from its data: it rejoins, as the replica of the node that
    /// took its place.
    pub fn restart(&self, port: u16) {
        stack(&[
            "cluster-node-up",
            &self.first.to_string(),
            &port.to_string(),
        ]);
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/stack.sh");
        let _ = Command::new(script)
            .args(["cluster-down", &self.first.to_string()])
            .output();
    }
}
