//! What Floodgate's OpenAPI documents share (the booking service's and the gateway's, each made
//! from its own handlers): the error responses, the `{sale}` parameter, serving a document.

use axum::response::IntoResponse as _;
use axum::routing::get;
use utoipa::openapi::{self, RefOr};
use utoipa::IntoParams;

/// The `{sale}` path parameter of every sale's route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Read by the documents only; handlers take the segment as a string.
pub struct SalePath {
    /// The sale's id: 1 to 64 ASCII letters, digits, `-`, `_` or `.`.
    #[param(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    sale: String,
}

/// `GET /openapi.json`: the listener's own document, serialised once.
pub fn serve_document<S: Clone + Send + Sync + 'static>(
    document: &openapi::OpenApi,
) -> axum::routing::MethodRouter<S> {
    let body = axum::body::Bytes::from(
        document
            .to_json()
            .expect("an OpenAPI document always serialises"),
    );
    get(move || {
        let body = body.clone();
        async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
        }
    })
}

/// One error response: the error body, and `Retry-After` on a 429 or a 503.
pub fn refusal(status: u16, description: &str) -> RefOr<openapi::Response> {
    let content = openapi::ContentBuilder::new()
        .schema(Some(openapi::Ref::from_schema_name("ErrorBody")))
        .build();
    let mut response = openapi::ResponseBuilder::new()
        .description(description)
        .content("application/json", content);
    if status == 503 || status == 429 {
        response = response.header(
            "Retry-After",
            openapi::HeaderBuilder::new()
                .schema(
                    openapi::ObjectBuilder::new()
                        .schema_type(openapi::schema::Type::Integer)
                        .minimum(Some(0)),
                )
                .description(Some("Seconds to wait before retrying."))
                .build(),
        );
    }
    response.build().into()
}

/// The error responses of an operation that refuses with `codes`: one per status, each status
/// and its description made from the codes' declarations (`floodgate_protocol::api::code`), so
/// a document cannot say a code comes with a status the services do not answer it with.
///
/// # Panics
/// On a code that is not declared: a document is built by the tests, so this is a test's
/// failure, never a request's.
pub fn refusal_responses(
    codes: &[&str],
) -> std::collections::BTreeMap<String, RefOr<openapi::Response>> {
    let mut by_status: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
    for name in codes {
        let code = floodgate_protocol::api::code::ALL
            .iter()
            .find(|c| c.name == *name)
            .unwrap_or_else(|| panic!("{name} is not a declared error code"));
        by_status
            .entry(code.status)
            .or_default()
            .push(format!("`{}`: {}.", code.name, code.meaning));
    }
    by_status
        .into_iter()
        .map(|(status, lines)| (status.to_string(), refusal(status, &lines.join(" "))))
        .collect()
}

/// A code, or a group of codes (`floodgate_protocol::api::code::IDENTITY`), in a list of
/// refusals.
pub trait Codes {
    fn codes(&self) -> &[&'static str];
}

impl Codes for &'static str {
    fn codes(&self) -> &[&'static str] {
        std::slice::from_ref(self)
    }
}

impl Codes for &'static [&'static str] {
    fn codes(&self) -> &[&'static str] {
        self
    }
}

/// Declares the codes an operation may refuse with (codes, or groups of them); its error
/// responses (a status each, and what each code means) are made from the codes' declarations
/// ([`refusal_responses`]).
#[macro_export]
macro_rules! refusals {
    ($(#[$doc:meta])* $name:ident [$($code:expr),+ $(,)?]) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::Response>,
            > {
                let codes: Vec<&str> = [$($crate::openapi::Codes::codes(&$code)),+].concat();
                $crate::openapi::refusal_responses(&codes)
            }
        }
    };
}

/// Refuses a query parameter an operation does not document, with 400 `unknown_parameter`, on
/// every route of `router` (the documented ones: apply it right after `split_for_parts`), and
/// documents that 400 on every operation of `document`.
///
/// Why refuse rather than ignore: behind a CDN a stranger's made-up parameter is a cache key
/// of its own, so ignoring it would let anyone send every request past the cache to the origin;
/// refused here, it costs a parse and no Redis work. The allowed names come from the document
/// itself, so the check and the contract cannot disagree.
pub fn strict_queries<S: Clone + Send + Sync + 'static>(
    router: axum::Router<S>,
    document: &mut openapi::OpenApi,
) -> axum::Router<S> {
    let mut allowed = Allowed::new();
    for (path, item) in document.paths.paths.iter_mut() {
        for (method, operation) in operations(item) {
            let names: Vec<String> = operation
                .parameters
                .iter()
                .flatten()
                .filter(|p| matches!(p.parameter_in, openapi::path::ParameterIn::Query))
                .map(|p| p.name.clone())
                .collect();
            operation
                .responses
                .responses
                .entry("400".into())
                .or_insert_with(|| refusal(400, "A query parameter this operation does not take."));
            allowed
                .entry(path.clone())
                .or_default()
                .push((method, names));
        }
    }
    let allowed = std::sync::Arc::new(allowed);
    router.route_layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let allowed = allowed.clone();
            async move {
                if let Some(unknown) = unknown_parameter(&allowed, &request) {
                    let body = floodgate_protocol::api::ErrorBody {
                        error: floodgate_protocol::api::code::UNKNOWN_PARAMETER.into(),
                        message: format!("this endpoint takes no query parameter {unknown:?}"),
                    };
                    return (axum::http::StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                }
                next.run(request).await
            }
        },
    ))
}

/// The query parameters each operation takes, by route pattern, then method: looked up with the
/// request's own strings, nothing allocated (every join is a query on `/ws`).
type Allowed = std::collections::HashMap<String, Vec<(&'static str, Vec<String>)>>;

/// The operations of a path item, by method.
fn operations(item: &mut openapi::PathItem) -> Vec<(&'static str, &mut openapi::path::Operation)> {
    [
        ("GET", item.get.as_mut()),
        ("POST", item.post.as_mut()),
        ("PUT", item.put.as_mut()),
        ("PATCH", item.patch.as_mut()),
        ("DELETE", item.delete.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.map(|operation| (method, operation)))
    .collect()
}

/// The first query parameter of `request` its operation does not take (its name, at most 64
/// characters of it), if any.
fn unknown_parameter(allowed: &Allowed, request: &axum::extract::Request) -> Option<String> {
    let query = request.uri().query().filter(|q| !q.is_empty())?;
    let path = request.extensions().get::<axum::extract::MatchedPath>()?;
    let method = request.method().as_str();
    let (_, names) = allowed
        .get(path.as_str())?
        .iter()
        .find(|(m, _)| *m == method)?;
    query
        .split('&')
        .map(|pair| pair.split_once('=').map_or(pair, |(name, _)| name))
        .find(|name| !name.is_empty() && !names.iter().any(|known| known == name))
        .map(|name| name.chars().take(64).collect())
}

#[cfg(test)]
mod tests {
    use floodgate_protocol::api::code;

    use super::*;

    fn description(response: &RefOr<openapi::Response>) -> &str {
        match response {
            RefOr::T(response) => &response.description,
            RefOr::Ref(_) => panic!("a reference"),
        }
    }

    #[test]
    fn refusals_are_grouped_under_each_codes_own_status() {
        let responses = refusal_responses(&[
            code::SOLD_OUT,
            code::TOKEN_SPENT,
            code::BAD_JSON,
            code::DRAW_BUSY,
        ]);
        let statuses: Vec<&str> = responses.keys().map(String::as_str).collect();
        assert_eq!(statuses, ["400", "409", "503"]);
        let conflict = description(&responses["409"]);
        assert!(conflict.contains("`sold_out`") && conflict.contains("`token_spent`"));
        assert!(description(&responses["400"]).contains("`bad_json`: the body is not JSON."));
    }

    #[test]
    #[should_panic(expected = "not a declared error code")]
    fn an_undeclared_code_cannot_be_documented() {
        let _ = refusal_responses(&["no_such_code"]);
    }
}
