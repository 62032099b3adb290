//! Who a request is from, as the per-address limits of every public listener count it: the peer,
//! or, behind a proxy the operator trusts (`FLOODGATE_TRUSTED_PROXIES`: the edge, a CDN), the
//! client it forwards for; and an IPv6 client as its whole prefix (`FLOODGATE_IPV6_PREFIX`), since
//! one host is routinely given a /64 and could otherwise take a fresh address per request.
//!
//! The limits themselves ([`Rate`]) live in each process's memory, never in Redis: they cost a
//! map lookup, and keep no state on a sale's slot (the slot every join of a sale meets).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRef, FromRequestParts};
use axum::http::request::Parts;
use ipnet::{IpNet, Ipv6Net};

use crate::http::ApiError;

mod rates;
pub mod seal;
pub use rates::{AddressRate, Rate, WIDER_IPV6};
pub use seal::{unsealed, EdgeSeal};

/// The IPv6 prefix length one client is counted by unless configured: RFC 6177 and the RIRs
/// hand end sites a /64 or more, and every address inside it is one host's to pick.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The settings, for every service with a public listener.
#[derive(Clone, Debug, clap::Args)]
pub struct ClientArgs {
    /// The proxies in front (a CDN's edges, a load balancer), comma-separated: CIDR ranges as
    /// CDNs publish them (`198.51.100.0/24,2001:db8::/32`) or single addresses. A connection from
    /// one of them is counted against the client address it forwards (the rightmost
    /// `X-Forwarded-For` entry that is not itself a trusted proxy); without this, every client
    /// behind the CDN would share the edge's address and its limits. The shipped edge needs no
    /// range here: it says the edge's word (`X-Floodgate-Edge`, from `FLOODGATE_EDGE_KEY`).
    #[arg(
        long,
        env = "FLOODGATE_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_trusted_proxy
    )]
    pub trusted_proxies: Vec<IpNet>,
    /// The per-address limits count an IPv6 client by this many leading bits of its address:
    /// one host is routinely given a whole /64 and can pick a fresh address from it per request.
    /// The /56 and the /48 around it are held to 16 and 256 times a client's allowance too.
    #[arg(long, env = "FLOODGATE_IPV6_PREFIX", default_value_t = DEFAULT_IPV6_PREFIX)]
    pub ipv6_prefix: u8,
    /// The key the credentials this service issues are sealed with for the edge (passes,
    /// resume tokens, reservations' secrets), the same on the edge, every gateway and every
    /// booking instance: the edge then counts a credential it can prove against that
    /// credential alone, not against its address's ceiling, so a stranger's junk from a
    /// carrier's address cannot have the edge refuse the people behind it. Letters, digits,
    /// `_` and `-`, at least 32. Unset: credentials are issued unsealed (docs/runbook.md,
    /// "The edge's seal").
    #[arg(long, env = "FLOODGATE_EDGE_KEY", hide_env_values = true)]
    pub edge_key: Option<secrecy::SecretString>,
}

impl Default for ClientArgs {
    fn default() -> Self {
        Self {
            trusted_proxies: Vec::new(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
            edge_key: None,
        }
    }
}

impl ClientArgs {
    /// The prefix must keep a provider's customers apart and a host's addresses together.
    pub fn check(&self) -> Result<(), String> {
        if !(32..=128).contains(&self.ipv6_prefix) {
            return Err(format!(
                "FLOODGATE_IPV6_PREFIX must be 32 to 128, not {}",
                self.ipv6_prefix
            ));
        }
        EdgeSeal::parse(self.edge_key.as_ref()).map(drop)
    }
}

/// How a service tells its clients apart.
#[derive(Clone, Debug)]
pub struct Clients {
    trusted: Vec<IpNet>,
    ipv6_prefix: u8,
    /// How credentials issued to clients are sealed for the edge.
    pub seal: EdgeSeal,
}

impl Clients {
    pub fn new(args: &ClientArgs) -> Self {
        Self {
            trusted: args.trusted_proxies.clone(),
            ipv6_prefix: args.ipv6_prefix.clamp(32, 128),
            // `check` refused a bad key before a service got here; a key it could not take
            // seals nothing rather than stopping a test's in-process service.
            seal: EdgeSeal::parse(args.edge_key.as_ref()).unwrap_or_default(),
        }
    }

    /// The client a request from `peer` with these `X-Forwarded-For` values counts as; `word`
    /// is its `X-Floodgate-Edge` header, if any: with the edge's word, the peer is an edge
    /// wherever it is (`EdgeSeal::edge_word`).
    pub fn of(&self, peer: IpAddr, forwarded_for: &[&str], word: Option<&str>) -> IpAddr {
        counted_as(self.address(peer, forwarded_for, word), self.ipv6_prefix)
    }

    /// The client's own address, before [`counted_as`]: what a gateway forwards for it.
    pub fn address(&self, peer: IpAddr, forwarded_for: &[&str], word: Option<&str>) -> IpAddr {
        let vouched = word.is_some_and(|w| self.seal.is_edge_word(w));
        client_address(peer, forwarded_for, &self.trusted, vouched)
    }
}

/// The request header that carries the edge's word (`EdgeSeal::edge_word`).
pub const EDGE_WORD_HEADER: &str = "x-floodgate-edge";

/// A request's `X-Forwarded-For` values and its edge's word, as [`Clients::of`] takes them.
pub fn forwarding(headers: &axum::http::HeaderMap) -> (Vec<&str>, Option<&str>) {
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let word = headers.get(EDGE_WORD_HEADER).and_then(|v| v.to_str().ok());
    (forwarded, word)
}

/// The client a request is from, as the per-address limits count it: its address (behind a
/// trusted proxy, the one forwarded), an IPv6 one as its network of the configured prefix.
pub struct ClientAddress(pub IpAddr);

impl<S> FromRequestParts<S> for ClientAddress
where
    S: Send + Sync,
    Arc<Clients>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        // Every listener serves with the peer's address (platform::listener).
        let ConnectInfo(peer) = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .copied()
            .ok_or_else(|| ApiError::internal("a request without its peer's address"))?;
        let (forwarded, word) = forwarding(&parts.headers);
        let clients = Arc::<Clients>::from_ref(state);
        Ok(Self(clients.of(peer.ip(), &forwarded, word)))
    }
}

/// The address a connection from `peer` stands for: `peer` itself, unless it is a trusted proxy
/// (or `vouched` for, by the edge's word), in which case the rightmost `X-Forwarded-For` entry
/// that is not a trusted proxy (entries
/// further left were written by the client and prove nothing). Addresses are compared in their
/// canonical form, so a proxy that reaches a dual-stack listener as `::ffff:10.0.0.1` is still
/// the trusted `10.0.0.1`.
pub fn client_address(
    peer: IpAddr,
    forwarded_for: &[&str],
    trusted: &[IpNet],
    vouched: bool,
) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !vouched && !is_trusted(&peer) {
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

/// The client `ip` counts as: its IPv4 address (an IPv4-mapped IPv6 one counts as its IPv4
/// address), or its IPv6 network of `ipv6_prefix` bits (clamped to 32..=128).
pub fn counted_as(ip: IpAddr, ipv6_prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(
            Ipv6Net::new(v6, ipv6_prefix.clamp(32, 128))
                .expect("the prefix is clamped to at most 128")
                .network(),
        ),
    }
}

/// The widest network a share of an allowance counts `ip` in (`AddressRate::share`): an IPv4
/// client's /24, an IPv6 one's /48.
pub fn share_network(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(
            ipnet::Ipv4Net::new(v4, rates::SHARE_IPV4)
                .expect("a valid prefix")
                .network(),
        ),
        v6 => counted_as(v6, rates::WIDEST_IPV6),
    }
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

    #[test]
    fn a_share_counts_an_ipv4_24_and_an_ipv6_48() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(share_network(ip("198.51.100.7")), ip("198.51.100.0"));
        assert_eq!(share_network(ip("::ffff:198.51.100.7")), ip("198.51.100.0"));
        assert_eq!(share_network(ip("2001:db8:1:2:3::4")), ip("2001:db8:1::"));
    }

    #[test]
    fn forwarded_addresses_count_only_behind_a_trusted_proxy() {
        let edge: IpAddr = "10.1.1.1".parse().unwrap();
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        let trusted = [IpNet::from(edge)];
        // Direct connections are themselves, whatever they claim.
        assert_eq!(
            client_address(client, &["198.51.100.1"], &trusted, false),
            client
        );
        // Through the edge: the entry the edge appended, not what the client wrote before it.
        assert_eq!(
            client_address(edge, &["198.51.100.1, 203.0.113.7"], &trusted, false),
            client
        );
        assert_eq!(
            client_address(edge, &["203.0.113.7", "10.1.1.1"], &trusted, false),
            client,
            "several headers, and a trusted hop skipped"
        );
        assert_eq!(client_address(edge, &[], &trusted, false), edge);
        assert_eq!(client_address(edge, &["not-an-ip"], &trusted, false), edge);
    }

    #[test]
    fn the_edges_word_vouches_for_a_peer_in_no_trusted_range() {
        let key = "edge_key_of_thirty_two_characters_x";
        let clients = Clients::new(&ClientArgs {
            edge_key: Some(key.to_owned().into()),
            ..ClientArgs::default()
        });
        let word = clients.seal.edge_word().unwrap().to_owned();
        let edge: IpAddr = "172.31.4.5".parse().unwrap();
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        assert_eq!(clients.of(edge, &["203.0.113.7"], Some(&word)), client);
        // Without the word, or with a wrong one, the peer is itself.
        assert_eq!(clients.of(edge, &["203.0.113.7"], None), edge);
        assert_eq!(clients.of(edge, &["203.0.113.7"], Some("guess")), edge);
        // Without a key there is no word to say.
        let unkeyed = Clients::new(&ClientArgs::default());
        assert_eq!(unkeyed.of(edge, &["203.0.113.7"], Some(&word)), edge);
    }

    #[test]
    fn defect_03_an_ipv4_mapped_peer_is_its_ipv4_address() {
        let edge: IpAddr = "10.1.1.1".parse().unwrap();
        let mapped_edge: IpAddr = "::ffff:10.1.1.1".parse().unwrap();
        let client: IpAddr = "203.0.113.7".parse().unwrap();
        // A dual-stack listener sees the edge as ::ffff:10.1.1.1: it is still the trusted edge.
        assert_eq!(
            client_address(mapped_edge, &["203.0.113.7"], &[IpNet::from(edge)], false),
            client
        );
        assert_eq!(
            counted_as("::ffff:203.0.113.7".parse().unwrap(), 64),
            client
        );
    }

    #[test]
    fn an_ipv6_client_counts_as_its_prefix() {
        let a = counted_as("2001:db8:1:2::1".parse().unwrap(), 64);
        assert_eq!(a, counted_as("2001:db8:1:2:ffff::9".parse().unwrap(), 64));
        assert_ne!(a, counted_as("2001:db8:1:3::1".parse().unwrap(), 64));
        assert_eq!(
            counted_as("2001:db8:1:2::1".parse().unwrap(), 48),
            counted_as("2001:db8:1:3::1".parse().unwrap(), 48)
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
                client_address(edge.parse().unwrap(), &["203.0.113.7"], &cdn, false),
                client,
                "{edge} is one of the CDN's edges"
            );
        }
        assert_eq!(
            client_address(
                "198.51.101.1".parse().unwrap(),
                &["203.0.113.7"],
                &cdn,
                false
            ),
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
}
