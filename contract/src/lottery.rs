//! The pre-queue lottery: a verifiable, uniformly random order for everyone who joined before
//! the opening (building block of the fair waiting room; the gateway wiring comes with it).
//!
//! How it is made verifiable:
//! 1. When the pre-queue opens, the operator picks a secret 32-byte seed and publishes its
//!    [`commitment`] (SHA-256 of the seed). From then on the seed cannot be changed unseen.
//! 2. At the opening, the pre-queue is closed and a digest of its ticket list is published. The
//!    draw uses [`draw_seed`] = SHA-256(secret seed || pre-queue digest): a value nobody could know
//!    while tickets were being handed out, not even the operator, because it depends on the full
//!    list of who came.
//! 3. The secret seed is revealed. Anyone can check it against the commitment, recompute the
//!    draw seed, and recompute every position with [`Lottery::position`].
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

/// The seed the draw actually uses: the secret mixed with a digest of the closed pre-queue.
pub fn draw_seed(secret_seed: &[u8; 32], prequeue_digest: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(secret_seed);
    hasher.update(prequeue_digest);
    hasher.finalize().into()
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
        assert_ne!(draw_seed(&secret, &[0; 32]), draw_seed(&secret, &[1; 32]));
    }
}
