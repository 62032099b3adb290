//! `GET /readyz` of every service: whether the process should be sent traffic now. Each
//! dependency it needs must answer within [`CHECK_TIMEOUT`], and it must not be draining (a
//! gateway turns unready as soon as it is told to stop, before it closes a socket, so a load
//! balancer stops sending it joins first). `/healthz` stays what it was: the process is alive,
//! whatever its dependencies say (restarting it would not bring them back).
//!
//! A **shared** check ([`Check::shared`]) is reported but never makes the process unready: its
//! dependency's fault is one that every instance shares (Redis, the booking service's broker
//! and PostgreSQL), so taking instances out of the load balancer would only leave the edge with
//! bare 502s to give, where each instance answers its clients a JSON 503 with `Retry-After` at
//! once, and only for what needs the missing part. Only draining makes a gateway or a booking
//! instance unready.

use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::redis_conn::RedisConn;

/// How long one dependency may take to answer a readiness check: a probe is answered well
/// inside the one-second timeouts load balancers and kubelets use by default.
pub const CHECK_TIMEOUT: Duration = Duration::from_millis(800);

/// The body of `GET /readyz`, answered 200 when `status` is `ready` and 503 when `unready`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Readiness {
    /// `ready` or `unready`.
    pub status: String,
    /// Each check, in a fixed order.
    pub checks: Vec<CheckResult>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct CheckResult {
    /// `draining`, `redis`, `postgres`, `kafka`.
    pub name: String,
    pub ok: bool,
    /// A dependency every instance shares: its failure is reported, and the process stays
    /// ready (it answers its clients a 503 of its own meanwhile).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Readiness {
    pub fn ready(&self) -> bool {
        self.status == "ready"
    }

    /// The same answer without each failed check's reason: what a public listener says (which
    /// check failed is enough for a load balancer; a dependency's own words, its address or
    /// version, are for operators, on the admin port).
    pub fn without_reasons(mut self) -> Self {
        for check in &mut self.checks {
            check.error = None;
        }
        self
    }

    /// The probe's HTTP answer: 200 or 503, and this body.
    pub fn answer(self) -> (axum::http::StatusCode, axum::Json<Self>) {
        let status = axum::http::StatusCode::from_u16(self.http_status())
            .unwrap_or(axum::http::StatusCode::SERVICE_UNAVAILABLE);
        (status, axum::Json(self))
    }

    /// The HTTP status a probe answers with.
    pub fn http_status(&self) -> u16 {
        if self.ready() {
            200
        } else {
            503
        }
    }
}

/// One named check: resolves to `Err(why)` when its dependency does not answer.
pub struct Check {
    name: &'static str,
    probe: BoxFuture<'static, Result<(), String>>,
    shared: bool,
}

impl Check {
    pub fn new(
        name: &'static str,
        probe: impl std::future::Future<Output = Result<(), String>> + Send + 'static,
    ) -> Self {
        Self {
            name,
            probe: probe.boxed(),
            shared: false,
        }
    }

    /// A check of a dependency every instance shares: reported, never gating (see above).
    pub fn shared(
        name: &'static str,
        probe: impl std::future::Future<Output = Result<(), String>> + Send + 'static,
    ) -> Self {
        Self {
            shared: true,
            ..Self::new(name, probe)
        }
    }

    /// This check, reported but never making the process unready (see [`Check::shared`]).
    pub fn as_shared(self) -> Self {
        Self {
            shared: true,
            ..self
        }
    }

    /// Fails once `draining` is cancelled (the process is stopping).
    pub fn draining(draining: &CancellationToken) -> Self {
        let stopping = draining.is_cancelled();
        Self::new("draining", async move {
            if stopping {
                Err("this process is shutting down".into())
            } else {
                Ok(())
            }
        })
    }

    /// Redis answers `PING`: a shared check, reported and never gating. Every gateway and
    /// booking instance shares its Redis, so its fault is every instance's at once: in a
    /// cluster, `PING` goes to every primary and needs all of them, and one primary dead until
    /// its replica is promoted, or the sale's own primary too busy to answer within the check's
    /// timeout at the opening, would take every pod out of its Services together, and the edge
    /// would answer 503 to every join, page and reservation, those of the other slots too. In
    /// the load balancer, each instance refuses only the requests whose slot cannot answer
    /// (a JSON 503 with `Retry-After`), and serves the rest.
    pub fn redis(conn: &RedisConn) -> Self {
        let mut conn = conn.clone();
        Self::shared("redis", async move {
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }

    /// PostgreSQL answers a query.
    pub fn postgres(db: &sqlx::PgPool) -> Self {
        let db = db.clone();
        Self::new("postgres", async move {
            sqlx::query("select 1")
                .execute(&db)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }
}

/// How long a dependency's answer to a check is taken for its state now: a probe asked again
/// within it is answered from memory.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(1);

/// A dependency's latest answer to its check, taken for its state for [`REMEMBERED_FOR`]: a
/// probe's question can come from anyone who reaches the public listener (through the edge, or
/// past it), and `PING` in a Redis Cluster goes to every primary, so a flood of probes would be
/// a flood of every primary. However many ask, one check at a time runs, at most once a second
/// (a kubelet asks every few seconds, and sees a failure within a second of it starting).
#[derive(Default)]
pub struct Remembered {
    last: tokio::sync::Mutex<Option<(std::time::Instant, Result<(), String>)>>,
}

impl Remembered {
    /// `check`, answered from its latest outcome if that is recent enough.
    pub fn check(self: &std::sync::Arc<Self>, check: Check) -> Check {
        let this = self.clone();
        let Check {
            name,
            probe,
            shared,
        } = check;
        let remembered = async move {
            // Whoever comes while a check runs waits for its outcome (one runs at a time).
            let mut last = this.last.lock().await;
            if let Some((_, outcome)) = last
                .as_ref()
                .filter(|(at, _)| at.elapsed() < REMEMBERED_FOR)
            {
                return outcome.clone();
            }
            let outcome = match tokio::time::timeout(CHECK_TIMEOUT, probe).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("no answer within {} ms", CHECK_TIMEOUT.as_millis())),
            };
            *last = Some((std::time::Instant::now(), outcome.clone()));
            outcome
        };
        Check {
            name,
            probe: remembered.boxed(),
            shared,
        }
    }
}

/// A [`Remembered`] for each dependency, by its check's name: what a service's state keeps.
#[derive(Default)]
pub struct RememberedChecks {
    by_name: std::sync::Mutex<std::collections::HashMap<&'static str, std::sync::Arc<Remembered>>>,
}

impl RememberedChecks {
    /// `check`, answered from its dependency's latest outcome if that is recent enough.
    pub fn check(&self, check: Check) -> Check {
        let remembered = self
            .by_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(check.name)
            .or_default()
            .clone();
        remembered.check(check)
    }
}

/// Runs every check at once, each for at most [`CHECK_TIMEOUT`]: ready when all pass (shared
/// ones aside).
pub async fn check(checks: Vec<Check>) -> Readiness {
    let results = futures::future::join_all(checks.into_iter().map(|check| async move {
        let outcome = match tokio::time::timeout(CHECK_TIMEOUT, check.probe).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer within {} ms", CHECK_TIMEOUT.as_millis())),
        };
        CheckResult {
            name: check.name.to_owned(),
            ok: outcome.is_ok(),
            shared: check.shared,
            error: outcome.err(),
        }
    }))
    .await;
    let ready = results.iter().all(|r| r.ok || r.shared);
    // Whether this Pod is in its Services' endpoints, for an alert on how many are
    // (FloodgateFewReadyEndpoints): kube-state-metrics would say it too, but is one more thing
    // an operator must run.
    metrics::gauge!("floodgate_ready").set(f64::from(u8::from(ready)));
    // What each probe found, for an alert to tell one Pod cut off from a dependency (its own
    // network, a full conntrack table) from a fault every Pod shares: shared checks never make
    // a Pod unready, so nothing else would say it.
    for result in results.iter().filter(|r| r.name != "draining") {
        metrics::gauge!("floodgate_dependency_up", "dependency" => result.name.clone())
            .set(f64::from(u8::from(result.ok)));
    }
    Readiness {
        status: if ready { "ready" } else { "unready" }.into(),
        checks: results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ready_only_when_every_check_passes_in_time() {
        let ok = || Check::new("a", async { Ok(()) });
        let ready = check(vec![ok(), ok()]).await;
        assert!(ready.ready());
        assert_eq!(ready.http_status(), 200);

        let slow = Check::new("slow", async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        });
        let failing = Check::new("b", async { Err("down".to_owned()) });
        let draining = CancellationToken::new();
        draining.cancel();
        let unready = check(vec![ok(), failing, slow, Check::draining(&draining)]).await;
        assert_eq!(unready.http_status(), 503);
        let failed: Vec<&str> = unready
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(failed, ["b", "slow", "draining"]);
        assert!(unready.checks[2]
            .error
            .as_deref()
            .unwrap()
            .contains("no answer"));

        // A shared dependency's failure is reported, and the process stays ready.
        let shared = Check::shared("kafka", async { Err("down".to_owned()) });
        let degraded = check(vec![ok(), shared]).await;
        assert_eq!(degraded.http_status(), 200);
        assert!(degraded.checks[1].shared && !degraded.checks[1].ok);
    }

    #[tokio::test]
    async fn a_remembered_check_asks_its_dependency_at_most_once_a_second() {
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::sync::Arc;
        let asked = Arc::new(AtomicU32::new(0));
        let remembered = Arc::new(Remembered::default());
        let ping = || {
            let asked = asked.clone();
            remembered.check(Check::new("redis", async move {
                asked.fetch_add(1, Ordering::SeqCst);
                Err("down".to_owned())
            }))
        };
        // A flood of probes at once, and one after another: one question.
        let flood = (0..50).map(|_| check(vec![ping()]));
        let answers = futures::future::join_all(flood).await;
        assert!(answers.iter().all(|a| !a.ready()), "each told the outcome");
        assert!(!check(vec![ping()]).await.ready());
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        // Past the second, asked again.
        tokio::time::sleep(REMEMBERED_FOR).await;
        check(vec![ping()]).await;
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }
}
