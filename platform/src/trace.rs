//! Traces across the path (docs/runbook.md, "Traces"): a reservation's spans, from the booking
//! handler through the broker to the consumer's write, share one trace id.
//!
//! - Export is off by default. With `OTEL_EXPORTER_OTLP_ENDPOINT` set (the OpenTelemetry
//!   standard variable, e.g. `http://otel-collector:4318`), every service exports its spans by
//!   OTLP over HTTP, protobuf unless `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`, in batches
//!   (`OTEL_BSP_SCHEDULE_DELAY`, default 5 s), under the service's name.
//! - The context travels as W3C `traceparent` (and `tracestate`): in from an HTTP request's
//!   headers, out in the Kafka event's headers ([`kafka_headers`]), and in again at the consumer
//!   ([`from_kafka`]). With export off nothing is added to a message.
//! - The logs' own filter (`RUST_LOG`) does not decide which spans are exported: a service that
//!   logs only errors still exports its info-level spans.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Context;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use rdkafka::message::OwnedHeaders;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Whether spans are exported: when not, nothing is extracted or injected (the request and
/// publish paths skip the propagator altogether).
static EXPORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn exporting() -> bool {
    EXPORTING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Flushes the exporter's last spans when dropped: `main` keeps it until the service ends.
#[must_use = "dropping it stops the export"]
pub struct Exporting(Option<SdkTracerProvider>);

impl Drop for Exporting {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take() {
            if let Err(e) = provider.shutdown() {
                eprintln!("the last spans could not be exported: {e}");
            }
        }
    }
}

/// The OTLP exporter's tracer provider for `service`, if `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
pub fn provider(service: &'static str) -> Result<Option<SdkTracerProvider>, String> {
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .unwrap_or_default();
    if endpoint.trim().is_empty() {
        return Ok(None);
    }
    let protocol = match std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
        Ok("http/json") => Protocol::HttpJson,
        Ok("http/protobuf") | Err(_) => Protocol::HttpBinary,
        Ok(other) => {
            return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?}: this build exports http/protobuf or http/json"
        ))
        }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .map_err(|e| format!("the OTLP exporter for {endpoint}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    EXPORTING.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build(),
    ))
}

/// The `tracing` layer that turns spans into OpenTelemetry spans (at info and above), and the
/// guard that flushes them; no layer when export is off.
pub fn layer<S>(
    service: &'static str,
) -> Result<(Option<impl tracing_subscriber::Layer<S>>, Exporting), String>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use tracing_subscriber::Layer as _;
    let Some(provider) = provider(service)? else {
        return Ok((None, Exporting(None)));
    };
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("floodgate"))
        .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
    Ok((Some(layer), Exporting(Some(provider))))
}

/// The trace context a request carries (`traceparent`, `tracestate`), taken as a handler's
/// argument and continued in its span ([`TraceContext::continue_in`]): the handler's span is
/// made only after the extractors ran.
#[derive(Clone, Debug, Default)]
pub struct TraceContext(axum::http::HeaderMap);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for TraceContext {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        let mut carried = axum::http::HeaderMap::new();
        for name in ["traceparent", "tracestate"] {
            if let Some(value) = parts.headers.get(name) {
                carried.insert(name, value.clone());
            }
        }
        Ok(Self(carried))
    }
}

impl TraceContext {
    /// Makes `span` a child of the request's trace, if it carries one.
    pub fn continue_in(&self, span: &tracing::Span) {
        continue_from_http(span, &self.0);
    }
}

/// Makes `span` a child of the trace context in `headers` (an HTTP request's), if any.
pub fn continue_from_http(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    struct Http<'a>(&'a axum::http::HeaderMap);
    impl Extractor for Http<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(|k| k.as_str()).collect()
        }
    }
    continue_from(span, &Http(headers));
}

fn continue_from(span: &tracing::Span, carrier: &dyn Extractor) {
    if !exporting() {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(carrier));
    if opentelemetry::trace::TraceContextExt::has_active_span(&parent) {
        let _ = span.set_parent(parent);
    }
}

/// Kafka headers carrying the current span's trace context (none when export is off).
pub fn kafka_headers() -> Option<OwnedHeaders> {
    struct Pairs(Vec<(String, String)>);
    impl Injector for Pairs {
        fn set(&mut self, key: &str, value: String) {
            self.0.push((key.to_owned(), value));
        }
    }
    if !exporting() {
        return None;
    }
    let context: Context = tracing::Span::current().context();
    let mut pairs = Pairs(Vec::new());
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut pairs));
    if pairs.0.is_empty() {
        return None;
    }
    Some(
        pairs
            .0
            .iter()
            .fold(OwnedHeaders::new(), |headers, (key, value)| {
                headers.insert(rdkafka::message::Header {
                    key,
                    value: Some(value.as_bytes()),
                })
            }),
    )
}

/// Makes `span` a child of the trace context a Kafka message carries, if any.
pub fn from_kafka(span: &tracing::Span, headers: Option<&impl rdkafka::message::Headers>) {
    struct Kafka(Vec<(String, String)>);
    impl Extractor for Kafka {
        fn get(&self, key: &str) -> Option<&str> {
            self.0
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.iter().map(|(k, _)| k.as_str()).collect()
        }
    }
    let Some(headers) = headers.filter(|_| exporting()) else {
        return;
    };
    let pairs = headers
        .iter()
        .filter(|h| matches!(h.key, "traceparent" | "tracestate"))
        .filter_map(|h| {
            Some((
                h.key.to_owned(),
                std::str::from_utf8(h.value?).ok()?.to_owned(),
            ))
        })
        .collect();
    continue_from(span, &Kafka(pairs));
}
