//! The pre-queue lottery: a verifiable, uniformly random order for everyone who joined before
//! the opening. Later arrivals queue first-come first-served behind the pre-queue.
//!
//! How it is made verifiable (docs/protocol.md walks a verifier through it):
//! 1. Arming picks a secret 32-byte seed and publishes its [`commitment`] (SHA-256 of the seed)
//!    at `GET /v1/sales/{sale}/draw` from the moment the pre-queue opens. From then on the seed
//!    cannot be changed unseen.
//! 2. Every pre-queue ticket gets a random draw nonce, told to its client, and the waiting room
//!    keeps a hash chain over them in ticket order: `chain = SHA1-hex(chain || nonce)`, starting
//!    from the empty string ([`chain_step`]). At the opening the pre-queue closes and the chain's
//!    last value is its digest: a value nobody could know while tickets were being handed out,
//!    not even the operator, because it depends on everyone who came. (SHA-1 because Redis'
//!    scripting offers only SHA-1; the digest needs to be unpredictable, which SHA-1 is, not
//!    collision-resistant, and the full nonce list is published so anyone can recompute it.)
//! 3. The draw uses [`draw_seed`] = SHA-256(secret seed || digest as ASCII hex). The secret seed
//!    is revealed with the digest and the nonce list; anyone can check the seed against the
//!    commitment, recompute the digest and the draw seed, and every place with [`Draw::place`].
//!
//! The permutation is a keyed Feistel network over the smallest power of four at least `n`, with
//! cycle walking to stay inside `[0, n)`: a bijection, evaluated for one ticket in O(1) without
//! materialising the order, so each gateway can place its own clients.

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

/// One link of the pre-queue's hash chain: the digest after `nonce` joined, given the digest
/// before it (empty for the first ticket). The same computation as `lua/join.lua`.
pub fn chain_step(previous: &str, nonce: &str) -> String {
    let mut hasher = sha1::Sha1::new();
    hasher.update(previous.as_bytes());
    hasher.update(nonce.as_bytes());
    hex::encode(hasher.finalize())
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
    use super::*;

    fn is_permutation(lottery: &Lottery, n: u64) -> bool {
        let mut seen = vec![false; n as usize];
        (0..n).all(|i| {
            let p = lottery.position(i) as usize;
            p < n as usize && !std::mem::replace(&mut seen[p], true)
        })
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
    fn the_chain_is_sha1_hex_of_the_previous_digest_and_the_nonce() {
        // SHA-1("abc"), the FIPS 180 test vector: the chain hashes the plain concatenation.
        assert_eq!(
            chain_step("a", "bc"),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_ne!(chain_step("", "x"), chain_step("", "y"));
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
