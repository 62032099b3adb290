//! A real Prometheus (Debian's, unpacked by `deploy/stack.sh tools`) scraping a test's services
//! every second with the shipped alert rules (deploy/observability/alerts.yaml) loaded, their
//! durations divided by [`TIME_SCALE`] so that an alert meant to wait minutes fires in seconds.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::containers::repo;
use crate::{eventually, unique};

/// How much faster than in production the test's rules run: every `for:` and every range or
/// subquery window of alerts.yaml is divided by it (`for: 1m` waits 6 s, `[2m]` looks back
/// 12 s). Prometheus scrapes and evaluates every second, so the shortest window still holds
/// several samples.
pub const TIME_SCALE: u64 = 10;

/// `text` with every duration of a rule (after `for: `, `[` or a subquery's `:`) divided by
/// `scale`, in seconds (at least one).
pub fn scaled_rules(text: &str, scale: u64) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let starts_duration = bytes[i].is_ascii_digit()
            && (text[..i].ends_with("for: ")
                || text[..i].ends_with('[')
                || text[..i].ends_with(':'));
        if starts_duration {
            let digits = text[i..].bytes().take_while(u8::is_ascii_digit).count();
            let unit = bytes.get(i + digits).copied();
            let seconds = match unit {
                Some(b's') => Some(1),
                Some(b'm') => Some(60),
                Some(b'h') => Some(3600),
                _ => None,
            };
            if let Some(per) = seconds {
                let value: u64 = text[i..i + digits].parse().unwrap();
                let scaled = (value * per / scale).max(1);
                out.push_str(&format!("{scaled}s"));
                i += digits + 1;
                continue;
            }
        }
        out.push(bytes[i] as char);
        i += 1;
    }
    out
}

/// A Prometheus of a test's own.
pub struct Prometheus {
    pub addr: SocketAddr,
    dir: PathBuf,
    child: Child,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port` of `/metrics`) every second, with the
    /// shipped alert rules scaled by [`TIME_SCALE`]; returns once every target is up.
    pub async fn start(targets: &[SocketAddr]) -> Prometheus {
        let dir = std::env::temp_dir().join(unique("floodgate-prometheus-"));
        std::fs::create_dir_all(&dir).unwrap();
        let rules =
            std::fs::read_to_string(repo().join("deploy/observability/alerts.yaml")).unwrap();
        std::fs::write(dir.join("alerts.yaml"), scaled_rules(&rules, TIME_SCALE)).unwrap();
        let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - alerts.yaml\n\
             scrape_configs:\n  - job_name: floodgate\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let addr = crate::gateways::free_port();
        let child = Command::new(crate::tool("prometheus/usr/bin/prometheus"))
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus starts (deploy/stack.sh tools unpacks it)");
        let prometheus = Prometheus {
            addr,
            dir,
            child,
            http: reqwest::Client::new(),
        };
        let count = targets.len();
        eventually(
            "Prometheus scrapes every target",
            Duration::from_secs(60),
            async || {
                let up = prometheus.query("sum(up)").await?;
                (up == count as f64).then_some(())
            },
        )
        .await;
        prometheus
    }

    /// `GET /api/v1/<path>` of this Prometheus, with `query`: its `data`.
    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Option<serde_json::Value> {
        let answer: serde_json::Value = self
            .http
            .get(format!("http://{}/api/v1/{path}", self.addr))
            .query(query)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        Some(answer["data"].clone())
    }

    /// The value of an instant query with one result, if it has one.
    pub async fn query(&self, query: &str) -> Option<f64> {
        let data = self.api("query", &[("query", query)]).await?;
        data["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// The state of alert `name` now: `firing` if any of its alerts fires, else `pending`, or
    /// `None` when it is quiet.
    pub async fn alert(&self, name: &str) -> Option<String> {
        let data = self.api("alerts", &[]).await?;
        let states: Vec<&str> = data["alerts"]
            .as_array()?
            .iter()
            .filter(|a| a["labels"]["alertname"] == name)
            .filter_map(|a| a["state"].as_str())
            .collect();
        let state = states.iter().find(|s| **s == "firing").or(states.first())?;
        Some((*state).to_owned())
    }

    /// Waits until alert `name` fires.
    pub async fn fires(&self, name: &str, timeout: Duration) {
        eventually(&format!("{name} fires"), timeout, async || {
            (self.alert(name).await.as_deref() == Some("firing")).then_some(())
        })
        .await;
    }

    /// Waits until alert `name` has cleared (neither firing nor pending).
    pub async fn clears(&self, name: &str, timeout: Duration) {
        eventually(&format!("{name} clears"), timeout, async || {
            self.alert(name).await.is_none().then_some(())
        })
        .await;
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            eprintln!(
                "--- prometheus:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_of_a_rule_is_scaled_and_nothing_else() {
        let rule = "expr: sum(rate(x_total{a=\"1m\"}[2m])) > 0.01 and delta(y[5m:30s]) > 1000\n\
                    for: 1m\nfor: 30s\nsummary: \"10 people in 2 minutes\"";
        assert_eq!(
            scaled_rules(rule, 10),
            "expr: sum(rate(x_total{a=\"1m\"}[12s])) > 0.01 and delta(y[30s:3s]) > 1000\n\
             for: 6s\nfor: 3s\nsummary: \"10 people in 2 minutes\""
        );
    }
}
