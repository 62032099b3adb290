//! The pre-queue lottery: a verifiable, uniformly random order for everyone who joined before
//! the opening. Later arrivals queue first-come first-served behind the pre-queue.
//!
//! How it is made verifiable (docs/protocol.md, "The lottery", walks a verifier through it and
//! says who can influence the order, and how):
//! 1. Arming picks a secret 32-byte seed and publishes its [`commitment`] (SHA-256 of the seed)
//!    at `GET /v1/sales/{sale}/draw` from the moment the pre-queue opens. From then on the seed
//!    cannot be changed unseen.
//! 2. Every client joining before the opening sends a draw nonce of its own choosing
//!    ([`check_nonce`]; the gateway picks one for a client that does not), echoed in its ticket.
//!    Joins are recorded in batches (one join per batch today; a gateway may fold a tick's joins
//!    into one batch): a batch of `count` consecutive tickets from `first` is the RFC 6962 Merkle
//!    tree of its nonces ([`leaf_hash`], [`merkle_root`]), and the waiting room keeps a hash chain
//!    over the batches in ticket order, `chain = SHA1-hex(chain || "<first>:<count>:<root>")`
//!    starting from the empty string ([`chain_link`]). Each person can check their own nonce is
//!    in their batch's tree ([`inclusion_path`], [`root_from_path`]) and the batch is a link of
//!    the chain. At the opening the pre-queue closes and the chain's last value is its digest.
//!    (SHA-1 for the chain because Redis' scripting offers only SHA-1: the chain needs to be
//!    unpredictable, which it is, and every batch is published so anyone can recompute it; the
//!    trees, whose proofs a person relies on, are SHA-256.)
//! 3. The draw uses [`draw_seed`] = SHA-256(secret seed || digest as ASCII hex). The secret seed
//!    is revealed with the digest and the batches; anyone can check the seed against the
//!    commitment, recompute the digest and the draw seed, and every place with [`Draw::place`].
//!
//! The permutation is a keyed Feistel network over the smallest power of four at least `n`, with
//! cycle walking to stay inside `[0, n)`: a bijection, evaluated for one ticket in O(1) without
//! materialising the order, so each gateway can place its own clients.

mod merkle;

pub use merkle::{inclusion_path, leaf_hash, merkle_root, root_from_path};
use sha2::{Digest, Sha256};

/// Feistel rounds. Four already make a pseudorandom permutation from a pseudorandom round
/// function (Luby-Rackoff); eight give margin at negligible cost (a few hashes per ticket).
const ROUNDS: u8 = 8;

/// SHA-256 of the secret seed: published when the pre-queue opens.
pub fn commitment(secret_seed: &[u8; 32]) -> [u8; 32] {
    Sha256::digest(secret_seed).into()
}

/// The seed the draw actually uses: the secret mixed with the digest of the closed pre-queue
/// (40 lowercase hex characters, or empty for an empty pre-queue).
pub fn draw_seed(secret_seed: &[u8; 32], prequeue_digest: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(secret_seed);
    hasher.update(prequeue_digest.as_bytes());
    hasher.finalize().into()
}

/// One link of the pre-queue's hash chain: the digest after the batch of `count` tickets from
/// `first` whose tree has `root` (lowercase hex) joined, given the digest before it (empty for
/// the first batch). The same computation as `lua/join.lua`.
pub fn chain_link(previous: &str, first: u64, count: u64, root: &str) -> String {
    let mut hasher = sha1::Sha1::new();
    hasher.update(previous.as_bytes());
    hasher.update(format!("{first}:{count}:{root}").as_bytes());
    hex::encode(hasher.finalize())
}

/// The shortest and longest draw nonce a client may choose: at least 64 bits of its own
/// randomness, at most 256.
pub const NONCE_HEX: std::ops::RangeInclusive<usize> = 16..=64;

/// Whether `nonce` is a draw nonce a client may send: 16 to 64 lowercase hex characters.
pub fn check_nonce(nonce: &str) -> Result<(), String> {
    let hex = nonce
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex && NONCE_HEX.contains(&nonce.len()) {
        Ok(())
    } else {
        Err(format!(
            "the draw nonce must be {} to {} lowercase hex characters",
            NONCE_HEX.start(),
            NONCE_HEX.end()
        ))
    }
}

/// A fresh random draw nonce, for a client that sent none.
pub fn random_nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// The closed pre-queue's order: where each ticket stands in line.
#[derive(Clone, Debug)]
pub struct Draw {
    lottery: Lottery,
    size: u64,
}

impl Draw {
    /// The draw of a pre-queue of `size` tickets (tickets `1..=size`) under `seed` (from
    /// [`draw_seed`]).
    pub fn new(seed: [u8; 32], size: u64) -> Self {
        Self {
            lottery: Lottery::new(seed, size),
            size,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The 1-based place in line of `ticket`: drawn for the pre-queue, the ticket number itself
    /// for later arrivals, who follow in the order they came.
    pub fn place(&self, ticket: u64) -> u64 {
        if ticket >= 1 && ticket <= self.size {
            self.lottery.position(ticket - 1) + 1
        } else {
            ticket
        }
    }

    /// The ticket at 1-based `place` in line: the inverse of [`Self::place`] (the leader asks
    /// it of the places about to be let in, to find the people who left before the draw).
    pub fn ticket_at(&self, place: u64) -> u64 {
        if place >= 1 && place <= self.size {
            self.lottery.index_at(place - 1) + 1
        } else {
            place
        }
    }
}

/// A keyed permutation of `[0, n)`.
#[derive(Clone, Debug)]
pub struct Lottery {
    seed: [u8; 32],
    n: u64,
    /// Bits in each Feistel half; the network permutes `[0, 4^half_bits)`.
    half_bits: u32,
}

impl Lottery {
    pub fn new(seed: [u8; 32], n: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        Self { seed, n, half_bits }
    }

    /// The 0-based place in the drawn order of the pre-queue member with 0-based join index
    /// `index` (`index < n`).
    pub fn position(&self, index: u64) -> u64 {
        assert!(
            index < self.n,
            "index {index} outside the pre-queue of {}",
            self.n
        );
        // Cycle walking: a permutation of the larger domain, re-applied until the value falls
        // inside [0, n), is a permutation of [0, n). The domain is under 4n, so this ends fast.
        let mut x = self.permute(index);
        while x >= self.n {
            x = self.permute(x);
        }
        x
    }

    /// The 0-based join index of the member at 0-based `position`: the inverse of
    /// [`Self::position`] (each Feistel round undone in reverse, cycle walking the same way).
    pub fn index_at(&self, position: u64) -> u64 {
        assert!(
            position < self.n,
            "position {position} outside the pre-queue of {}",
            self.n
        );
        let mut x = self.unpermute(position);
        while x >= self.n {
            x = self.unpermute(x);
        }
        x
    }

    fn unpermute(&self, y: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (y >> self.half_bits, y & mask);
        for round in (0..ROUNDS).rev() {
            // A round made (left, right) -> (right, left ^ F(right)): undo it.
            let before = right ^ (self.round(round, left) & mask);
            right = left;
            left = before;
        }
        (left << self.half_bits) | right
    }

    fn permute(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for round in 0..ROUNDS {
            let next = left ^ (self.round(round, right) & mask);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }

    fn round(&self, round: u8, value: u64) -> u64 {
        let mut hasher = Sha256::new();
        hasher.update(self.seed);
        hasher.update([round]);
        hasher.update(value.to_le_bytes());
        let digest = hasher.finalize();
        u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::merkle::node_hash;
    use super::*;

    fn is_permutation(lottery: &Lottery, n: u64) -> bool {
        let mut seen = vec![false; n as usize];
        (0..n).all(|i| {
            let p = lottery.position(i) as usize;
            p < n as usize && !std::mem::replace(&mut seen[p], true)
        })
    }

    #[test]
    fn a_place_leads_back_to_its_ticket() {
        for n in [1u64, 2, 3, 17, 1_000, 4_097] {
            let draw = Draw::new([9; 32], n);
            for ticket in 1..=n {
                assert_eq!(draw.ticket_at(draw.place(ticket)), ticket, "n = {n}");
            }
            assert_eq!(
                draw.ticket_at(n + 5),
                n + 5,
                "a later arrival is its own place"
            );
        }
    }

    #[test]
    fn every_size_is_a_bijection() {
        for n in [1u64, 2, 3, 5, 16, 17, 100, 1_000, 4_097] {
            assert!(is_permutation(&Lottery::new([7; 32], n), n), "n = {n}");
        }
    }

    #[test]
    fn the_order_depends_on_the_seed_and_nothing_else() {
        let a = Lottery::new([1; 32], 1_000);
        let again = Lottery::new([1; 32], 1_000);
        let b = Lottery::new([2; 32], 1_000);
        let order = |l: &Lottery| (0..1_000).map(|i| l.position(i)).collect::<Vec<_>>();
        assert_eq!(order(&a), order(&again), "anyone can recompute it");
        assert_ne!(order(&a), order(&b));
        assert_ne!(
            order(&a),
            (0..1_000).collect::<Vec<_>>(),
            "it is not the join order"
        );
    }

    #[test]
    fn positions_are_spread_evenly() {
        // Where the first joiner lands, over many seeds: roughly uniform over ten buckets.
        let n = 1_000u64;
        let mut buckets = [0u32; 10];
        for s in 0..2_000u32 {
            let mut seed = [0u8; 32];
            seed[..4].copy_from_slice(&s.to_le_bytes());
            buckets[(Lottery::new(seed, n).position(0) * 10 / n) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (120..=280).contains(&b)),
            "{buckets:?}"
        );
    }

    #[test]
    fn the_commitment_binds_the_seed_and_the_draw_mixes_in_the_prequeue() {
        let secret = [9u8; 32];
        assert_eq!(commitment(&secret), commitment(&[9u8; 32]));
        assert_ne!(commitment(&secret), commitment(&[8u8; 32]));
        assert_ne!(draw_seed(&secret, "00"), draw_seed(&secret, "01"));
    }

    #[test]
    fn the_chain_is_sha1_hex_of_the_previous_digest_and_the_batch() {
        // SHA-1("abc"), the FIPS 180 test vector: the chain hashes the plain concatenation of
        // the previous digest and "<first>:<count>:<root>".
        let mut hasher = sha1::Sha1::new();
        hasher.update(b"prev1:2:ab");
        assert_eq!(
            chain_link("prev", 1, 2, "ab"),
            hex::encode(hasher.finalize())
        );
        assert_ne!(chain_link("", 1, 1, "x"), chain_link("", 1, 1, "y"));
        assert_ne!(chain_link("", 1, 1, "x"), chain_link("", 2, 1, "x"));
    }

    #[test]
    fn nonces_are_lowercase_hex_of_a_bounded_length() {
        assert!(check_nonce(&"0f".repeat(8)).is_ok());
        assert!(check_nonce(&"a".repeat(64)).is_ok());
        assert!(check_nonce(&random_nonce()).is_ok());
        for bad in [
            "",
            "abc",
            &"A".repeat(16),
            &"g".repeat(16),
            &"a".repeat(65),
            "0123456789abcde ",
        ] {
            assert!(check_nonce(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_leaf_of_every_tree_proves_its_way_to_the_root() {
        for n in 1..=33usize {
            let leaves: Vec<[u8; 32]> = (0..n).map(|i| leaf_hash(&format!("{i:016x}"))).collect();
            let root = merkle_root(&leaves);
            for (i, leaf) in leaves.iter().enumerate() {
                let path = inclusion_path(&leaves, i);
                assert_eq!(
                    root_from_path(*leaf, i as u64, n as u64, &path),
                    Some(root),
                    "leaf {i} of {n}"
                );
                // Another leaf, another place, or another size do not prove it.
                let other = leaf_hash("not in the tree");
                assert_ne!(root_from_path(other, i as u64, n as u64, &path), Some(root));
                if n > 1 {
                    let elsewhere = (i as u64 + 1) % n as u64;
                    assert_ne!(
                        root_from_path(*leaf, elsewhere, n as u64, &path),
                        Some(root)
                    );
                }
            }
        }
    }

    #[test]
    fn the_tree_follows_rfc_6962() {
        // One leaf is its own root; two and three leaves split as RFC 6962 says.
        let (a, b, c) = (leaf_hash("a"), leaf_hash("b"), leaf_hash("c"));
        assert_eq!(merkle_root(&[a]), a);
        assert_eq!(merkle_root(&[a, b]), node_hash(&a, &b));
        assert_eq!(merkle_root(&[a, b, c]), node_hash(&node_hash(&a, &b), &c));
        // The leaf is SHA-256(0x00 || data): domain-separated from inner nodes.
        let mut hasher = Sha256::new();
        hasher.update(b"\x00a");
        assert_eq!(leaf_hash("a"), <[u8; 32]>::from(hasher.finalize()));
    }

    #[test]
    fn the_draw_shuffles_the_prequeue_and_queues_later_arrivals_in_order() {
        let draw = Draw::new([3; 32], 100);
        let mut places: Vec<u64> = (1..=100).map(|t| draw.place(t)).collect();
        assert_ne!(places, (1..=100).collect::<Vec<_>>());
        places.sort_unstable();
        assert_eq!(
            places,
            (1..=100).collect::<Vec<_>>(),
            "a permutation of 1..=100"
        );
        assert_eq!(draw.place(101), 101);
        assert_eq!(draw.place(5_000), 5_000);
        assert_eq!(
            Draw::new([3; 32], 0).place(1),
            1,
            "no pre-queue: plain FIFO"
        );
    }
}
