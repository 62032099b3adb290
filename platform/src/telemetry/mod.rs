//! What the services measure, and how it renders: one Prometheus recorder per process, every
//! latency a histogram (buckets, so instances add up; a summary's quantiles cannot be summed),
//! and the measurements every service shares: each HTTP request by listener and route, each
//! Redis command and script.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

mod help;
mod process;

/// Buckets of every `*_seconds` histogram: from half a millisecond (a Redis script) to ten
/// seconds (a broker that stalls), about two and a half per decade.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of the consumer's batch sizes (events per transaction, at most 500 by default).
pub const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// The process-wide Prometheus recorder, installed on first use. Every service serves its
/// rendering at `GET /metrics`; several services in one process (the tests) share it.
pub fn metrics() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("floodgate_consumer_batch_size".into()),
                    BATCH_BUCKETS,
                )
            })
            .expect("the buckets are not empty")
            .install_recorder()
            .expect("the Prometheus recorder is installed once per process");
        describe();
        handle
    })
}

/// The metrics as Prometheus text, with this process' resident memory read just now, then
/// the standard `process_*` metrics and `floodgate_build_info` (what every service's
/// `GET /metrics` answers).
pub fn render() -> String {
    if let Some(bytes) = resident_memory_bytes() {
        metrics::gauge!("floodgate_process_resident_memory_bytes").set(bytes as f64);
    }
    let mut text = metrics().render();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text + &process::render()
}

/// This process' resident set, from `/proc/self/statm` (pages; Linux's page is 4 KiB on every
/// machine Floodgate runs on); `None` where there is no such file.
pub fn resident_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn describe() {
    for (name, help) in help::METRICS {
        // The recorder keeps the help by name; the kind only picks the macro.
        if name.ends_with("_seconds") || *name == "floodgate_consumer_batch_size" {
            metrics::describe_histogram!(*name, *help);
        } else if name.ends_with("_total") {
            metrics::describe_counter!(*name, *help);
        } else {
            metrics::describe_gauge!(*name, *help);
        }
    }
}

/// `router` with every request counted and timed as `floodgate_http_requests_total` and
/// `floodgate_http_request_duration_seconds`, labelled with `listener`, the route's pattern
/// (never the path a stranger sent: `/v1/sales/{sale}/seats`, or `fallback`), the method and
/// the status.
pub fn instrument<S: Clone + Send + Sync + 'static>(
    router: axum::Router<S>,
    listener: &'static str,
) -> axum::Router<S> {
    router.layer(axum::middleware::from_fn_with_state(listener, track))
}

async fn track(State(listener): State<&'static str>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "fallback".to_owned(), |p| p.as_str().to_owned());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!(
        "floodgate_http_request_duration_seconds",
        "listener" => listener, "route" => route.clone(), "method" => method
    )
    .record(started.elapsed().as_secs_f64());
    metrics::counter!(
        "floodgate_http_requests_total",
        "listener" => listener, "route" => route, "method" => method, "status" => status
    )
    .increment(1);
    response
}

/// The methods an API uses, and `other` for anything a client makes up (one label value, not
/// one per invented method).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The names of the Lua scripts this process loaded, by SHA-1, so that `EVALSHA` is measured
/// per script (`floodgate_redis_script_duration_seconds{script}`).
fn script_names() -> &'static RwLock<HashMap<String, Arc<str>>> {
    static NAMES: OnceLock<RwLock<HashMap<String, Arc<str>>>> = OnceLock::new();
    NAMES.get_or_init(Default::default)
}

/// Remembers `script`'s name: what the first line of its own source (`body`, without the
/// helpers put before it) names (`-- reserve: ...`; every script in `lua/` starts so).
pub fn name_script(script: &redis::Script, body: &str) {
    let name = body
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("-- "))
        .and_then(|rest| rest.split_once(':'))
        .map(|(name, _)| name.trim())
        .filter(|name| !name.is_empty() && !name.contains(' '))
        .unwrap_or("unnamed");
    script_names()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(script.get_hash().to_owned(), Arc::from(name));
}

/// The histograms Redis requests are timed into, by what identifies a request on the wire (a
/// script's SHA-1, a command's name, `PIPELINE`): each handle is made once and reused, so a
/// request builds no label and allocates nothing. Made after the recorder is installed, so no
/// handle is ever one of the no-op recorder's.
fn redis_timers() -> &'static RwLock<HashMap<Box<[u8]>, metrics::Histogram>> {
    static TIMERS: OnceLock<RwLock<HashMap<Box<[u8]>, metrics::Histogram>>> = OnceLock::new();
    TIMERS.get_or_init(|| {
        metrics();
        RwLock::default()
    })
}

/// The histogram the request `key` is timed into, made from `label` the first time.
fn redis_timer_for(
    key: &[u8],
    label: impl FnOnce() -> (&'static str, String),
) -> metrics::Histogram {
    let timers = redis_timers();
    if let Some(timer) = timers.read().unwrap_or_else(|e| e.into_inner()).get(key) {
        return timer.clone();
    }
    let timer = match label() {
        ("script", name) => {
            metrics::histogram!("floodgate_redis_script_duration_seconds", "script" => name)
        }
        (_, name) => {
            metrics::histogram!("floodgate_redis_command_duration_seconds", "command" => name)
        }
    };
    timers
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key.into())
        .or_insert(timer)
        .clone()
}

/// The histogram one Redis command is timed into: its script's, by name, for `EVALSHA`; else
/// its command's.
pub(crate) fn redis_timer(cmd: &redis::Cmd) -> metrics::Histogram {
    let mut args = cmd.args_iter();
    let key: &[u8] = match args.next() {
        Some(redis::Arg::Simple(command)) if command.eq_ignore_ascii_case(b"EVALSHA") => {
            match args.next() {
                Some(redis::Arg::Simple(sha)) => sha,
                _ => command,
            }
        }
        Some(redis::Arg::Simple(command)) => command,
        _ => b"unknown",
    };
    redis_timer_for(key, || redis_label(cmd))
}

/// The histogram a pipeline is timed into.
pub(crate) fn pipeline_timer() -> metrics::Histogram {
    redis_timer_for(b"PIPELINE", || ("command", "PIPELINE".to_owned()))
}

/// What one Redis request is, for its latency: a script's name, or the command.
fn redis_label(cmd: &redis::Cmd) -> (&'static str, String) {
    let mut args = cmd.args_iter();
    let command = match args.next() {
        Some(redis::Arg::Simple(bytes)) => bytes,
        _ => return ("command", "unknown".to_owned()),
    };
    if command.eq_ignore_ascii_case(b"EVALSHA") {
        if let Some(redis::Arg::Simple(sha)) = args.next() {
            let names = script_names().read().unwrap_or_else(|e| e.into_inner());
            let name = std::str::from_utf8(sha)
                .ok()
                .and_then(|sha| names.get(sha).map(|name| name.to_string()));
            return ("script", name.unwrap_or_else(|| "unnamed".to_owned()));
        }
    }
    let name = std::str::from_utf8(command)
        .unwrap_or("unknown")
        .to_ascii_uppercase();
    ("command", name)
}

/// A counter with one label whose value is one of a few fixed strings (a message's type, say),
/// made once per value and reused: what a hot path counts with, building no label per event.
pub fn fixed_label_counter(
    name: &'static str,
    label: &'static str,
    value: &'static str,
) -> metrics::Counter {
    type Counters = RwLock<HashMap<(&'static str, &'static str, &'static str), metrics::Counter>>;
    static COUNTERS: OnceLock<Counters> = OnceLock::new();
    let counters = COUNTERS.get_or_init(|| {
        metrics();
        RwLock::default()
    });
    let key = (name, label, value);
    if let Some(counter) = counters.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return counter.clone();
    }
    let counter = metrics::counter!(name, label => value);
    counters
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_insert(counter)
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_is_named_after_its_own_first_line_not_its_helpers() {
        let body = "-- reserve: the pool step\nreturn 1";
        let script = crate::lua::pool_script(body);
        name_script(&script, body);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(0);
        let (kind, name) = redis_label(&cmd);
        assert_eq!((kind, name.as_str()), ("script", "reserve"));
        let (kind, name) = redis_label(redis::cmd("hget").arg("k").arg("f"));
        assert_eq!((kind, name.as_str()), ("command", "HGET"));
    }

    #[test]
    fn latencies_render_as_histograms() {
        let handle = metrics();
        metrics::histogram!("floodgate_test_latency_seconds").record(0.003);
        metrics::histogram!("floodgate_consumer_batch_size").record(7.0);
        let text = handle.render();
        assert!(
            text.contains("floodgate_test_latency_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("floodgate_consumer_batch_size_bucket{le=\"10\"} 1"),
            "{text}"
        );
        assert!(!text.contains("quantile="), "no summaries: {text}");
    }
}
