//! HTTP caching for what the services serve to crowds through a CDN: bodies kept in the three
//! encodings a client may accept (brotli, gzip, plain) with a strong ETag each, and
//! `If-None-Match` answered 304. The gateway's assets and seat counts and the booking service's
//! catalog documents are all served through [`respond`].

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// One body in the three encodings a client may accept, with a strong ETag per encoding.
pub struct Asset {
    content_type: &'static str,
    identity: Bytes,
    gzip: Bytes,
    br: Bytes,
    digest: String,
}

impl Asset {
    /// The content hash its name and ETags are made from.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The content, uncompressed.
    pub fn body(&self) -> &[u8] {
        &self.identity
    }
}

impl Asset {
    pub fn new(content_type: &'static str, body: Vec<u8>) -> Self {
        Self {
            content_type,
            digest: hex::encode(&Sha256::digest(&body)[..8]),
            gzip: gzip(&body),
            br: brotli(&body),
            identity: Bytes::from(body),
        }
    }
}

/// Whether the request's `If-None-Match` names `etag` (or `*`): then the answer is a 304.
pub fn etag_matches(if_none_match: Option<&HeaderValue>, etag: &str) -> bool {
    if_none_match
        .and_then(|v| v.to_str().ok())
        .is_some_and(|list| {
            list.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*")
        })
}

/// The representation `headers` accept (brotli, gzip or plain), or a 304 if `If-None-Match`
/// names its ETag, with `cache_control`.
pub fn respond(asset: &Asset, headers: &HeaderMap, cache_control: &'static str) -> Response {
    let encoding = negotiate(
        headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok()),
    );
    let (body, suffix, coding) = match encoding {
        Encoding::Brotli => (asset.br.clone(), "-br", Some("br")),
        Encoding::Gzip => (asset.gzip.clone(), "-gz", Some("gzip")),
        Encoding::Identity => (asset.identity.clone(), "", None),
    };
    let etag = format!("\"{}{suffix}\"", asset.digest);
    let revalidated = etag_matches(headers.get(header::IF_NONE_MATCH), &etag);
    let mut response = if revalidated {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = (StatusCode::OK, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        if let Some(coding) = coding {
            r.headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
        }
        r
    };
    let h = response.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex and quotes are a valid header"),
    );
    response
}

pub fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("writing to memory");
    Bytes::from(encoder.finish().expect("writing to memory"))
}

pub fn brotli(body: &[u8]) -> Bytes {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams {
        quality: 5,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &body[..], &mut out, &params).expect("writing to memory");
    Bytes::from(out)
}

/// The encodings this endpoint can answer with, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

/// Picks brotli, then gzip, from an `Accept-Encoding` header (a coding with `q=0` is refused).
pub fn negotiate(accept: Option<&str>) -> Encoding {
    let accepted = |name: &str| {
        accept.unwrap_or_default().split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            parts.next() == Some(name)
                && !parts.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
                })
        })
    };
    if accepted("br") {
        Encoding::Brotli
    } else if accepted("gzip") {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brotli_is_preferred_then_gzip_and_q0_refuses() {
        assert_eq!(negotiate(Some("gzip, deflate, br")), Encoding::Brotli);
        assert_eq!(negotiate(Some("gzip")), Encoding::Gzip);
        assert_eq!(negotiate(Some("br;q=0, gzip;q=0.8")), Encoding::Gzip);
        assert_eq!(negotiate(Some("identity")), Encoding::Identity);
        assert_eq!(negotiate(None), Encoding::Identity);
        assert_eq!(negotiate(Some("gzipx")), Encoding::Identity);
    }

    #[test]
    fn compressed_bodies_decompress_to_the_json() {
        use std::io::Read as _;
        let body = br#"{"sale":"s","pools":[]}"#;
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&gzip(body)[..])
            .read_to_end(&mut plain)
            .unwrap();
        assert_eq!(plain, body);
        let mut plain = Vec::new();
        brotli::BrotliDecompress(&mut &brotli(body)[..], &mut plain).unwrap();
        assert_eq!(plain, body);
    }

    #[test]
    fn if_none_match_names_an_etag_in_a_list_weak_or_any() {
        let header = |v: &str| HeaderValue::from_str(v).unwrap();
        assert!(etag_matches(Some(&header(r#""a", W/"b""#)), r#""b""#));
        assert!(etag_matches(Some(&header("*")), r#""c""#));
        assert!(!etag_matches(Some(&header(r#""a""#)), r#""c""#));
        assert!(!etag_matches(None, r#""c""#));
    }
}
