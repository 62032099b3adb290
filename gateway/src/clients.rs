//! Who a request is from, as the per-address limits count it: the peer, or, behind a proxy the
//! operator trusts (`FLOODGATE_TRUSTED_PROXIES`: the edge, a CDN), the client it forwards for.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use ipnet::IpNet;

use crate::error::ApiError;
use crate::AppState;

/// The client a request is from, as the per-address limits count it: the peer, or the client
/// a trusted proxy forwards for ([`client_address`]).
pub struct ClientAddress(pub IpAddr);

impl FromRequestParts<AppState> for ClientAddress {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // Every listener serves with the peer's address (`into_make_service_with_connect_info`).
        let ConnectInfo(peer) = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .copied()
            .ok_or_else(|| ApiError::internal("a request without its peer's address"))?;
        let forwarded: Vec<&str> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        Ok(Self(client_address(
            peer.ip(),
            &forwarded,
            &state.config.trusted_proxies,
        )))
    }
}

/// The address a connection from `peer` stands for: `peer` itself, unless it is a trusted proxy,
/// in which case the rightmost `X-Forwarded-For` entry that is not a trusted proxy (entries
/// further left were written by the client and prove nothing). Addresses are compared in their
/// canonical form, so a proxy that reaches a dual-stack listener as `::ffff:10.0.0.1` is still
/// the trusted `10.0.0.1`.
pub fn client_address(peer: IpAddr, forwarded_for: &[&str], trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut chain = forwarded_for
        .iter()
        .flat_map(|header| header.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    while let Some(entry) = chain.pop() {
        match entry.parse::<IpAddr>().map(|ip| ip.to_canonical()) {
            Ok(ip) if is_trusted(&ip) => continue,
            Ok(ip) => return ip,
            // A malformed entry: nothing to its left can be trusted either.
            Err(_) => return peer,
        }
    }
    peer
}

/// A trusted proxy as configured: a CIDR range (`203.0.113.0/24`, `2001:db8::/32`, as CDNs
/// publish them) or one address. IPv4-mapped IPv6 forms are taken as their IPv4 address.
pub fn parse_trusted_proxy(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    let net = match text.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) => IpNet::from(
            text.parse::<IpAddr>()
                .map_err(|_| format!("{text:?} is neither an address nor a CIDR range"))?,
        ),
    };
    Ok(match net {
        IpNet::V6(v6) => match v6.addr().to_ipv4_mapped() {
            Some(v4) => IpNet::new(IpAddr::V4(v4), v6.prefix_len().saturating_sub(96))
                .map_err(|e| e.to_string())?,
            None => net,
        },
        v4 => v4,
    }
    .trunc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{IpLimits, LimitError};

    #[test]
    fn forwarded_addresses_count_only_behind_a_trusted_proxy() {
        let edge: IpAddr = "10.1.1.1".parse().unwrap();
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        let trusted = [IpNet::from(edge)];
        // Direct connections are themselves, whatever they claim.
        assert_eq!(client_address(client, &["198.51.100.1"], &trusted), client);
        // Through the edge: the entry the edge appended, not what the client wrote before it.
        assert_eq!(
            client_address(edge, &["198.51.100.1, 203.0.113.7"], &trusted),
            client
        );
        assert_eq!(
            client_address(edge, &["203.0.113.7", "10.1.1.1"], &trusted),
            client,
            "several headers, and a trusted hop skipped"
        );
        assert_eq!(client_address(edge, &[], &trusted), edge);
        assert_eq!(client_address(edge, &["not-an-ip"], &trusted), edge);
    }

    #[test]
    fn defect_03_an_ipv6_client_counts_as_its_whole_64() {
        // One host gets a /64: every address in it is the same client to the limits.
        let limits = IpLimits::new(2, 1_000);
        let _a = limits.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        let _b = limits
            .admit("2001:db8:1:2:ffff::9".parse().unwrap())
            .unwrap();
        assert_eq!(
            limits.admit("2001:db8:1:2:abcd::1".parse().unwrap()).err(),
            Some(LimitError::TooManyConnections)
        );
        assert!(
            limits.admit("2001:db8:1:3::1".parse().unwrap()).is_ok(),
            "the next /64 is someone else"
        );
        let rate = IpLimits::new(1_000, 1);
        let slots: Vec<_> = (1..=2)
            .map(|i| {
                rate.admit(format!("2001:db8::{i}").parse().unwrap())
                    .unwrap()
            })
            .collect();
        assert_eq!(slots.len(), 2);
        assert_eq!(
            rate.admit("2001:db8::3".parse().unwrap()).err(),
            Some(LimitError::JoiningTooFast),
            "the join rate counts the /64 too"
        );
    }

    #[test]
    fn defect_03_an_ipv4_mapped_peer_is_its_ipv4_address() {
        let edge: IpAddr = "10.1.1.1".parse().unwrap();
        let mapped_edge: IpAddr = "::ffff:10.1.1.1".parse().unwrap();
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        // A dual-stack listener sees the edge as ::ffff:10.1.1.1: it is still the trusted edge.
        assert_eq!(
            client_address(mapped_edge, &["203.0.113.7"], &[IpNet::from(edge)]),
            client
        );
        // And a mapped client counts against the same entry as its plain IPv4 address.
        let limits = IpLimits::new(1, 1_000);
        let _held = limits.admit("203.0.113.7".parse().unwrap()).unwrap();
        assert_eq!(
            limits.admit("::ffff:203.0.113.7".parse().unwrap()).err(),
            Some(LimitError::TooManyConnections)
        );
    }

    #[test]
    fn trusted_proxies_are_ranges() {
        let cdn = [
            parse_trusted_proxy("198.51.100.0/24").unwrap(),
            parse_trusted_proxy("2001:db8:cd::/48").unwrap(),
            parse_trusted_proxy("::ffff:192.0.2.9").unwrap(),
        ];
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        for edge in [
            "198.51.100.77",
            "::ffff:198.51.100.3",
            "2001:db8:cd:1::5",
            "192.0.2.9",
        ] {
            assert_eq!(
                client_address(edge.parse().unwrap(), &["203.0.113.7"], &cdn),
                client,
                "{edge} is one of the CDN's edges"
            );
        }
        assert_eq!(
            client_address("198.51.101.1".parse().unwrap(), &["203.0.113.7"], &cdn),
            "198.51.101.1".parse::<IpAddr>().unwrap(),
            "outside the range: the peer itself"
        );
        assert!(parse_trusted_proxy("10.0.0.0/33").is_err());
        assert!(parse_trusted_proxy("edge.example").is_err());
        assert_eq!(
            parse_trusted_proxy("10.1.2.3/16").unwrap().to_string(),
            "10.1.0.0/16"
        );
    }

    #[test]
    fn the_ipv6_prefix_is_configurable() {
        let per_48 = IpLimits::with_ipv6_prefix(1, 1_000, 48);
        let _held = per_48.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert_eq!(
            per_48.admit("2001:db8:1:ffff::1".parse().unwrap()).err(),
            Some(LimitError::TooManyConnections)
        );
    }
}
