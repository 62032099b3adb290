//! The bot check at the door: a challenge a client must pass to join a sale's waiting room.
//!
//! A sale says which check it wants (`challenge` in its settings). The gateway asks the sale's
//! [`ChallengeVerifier`] about the answer a client sends with its join (`/ws?...&challenge=<answer>`).
//! The interface is what a CAPTCHA provider plugs into (its answer is the widget's response
//! token, checked at the provider); the built-in verifier is [`ProofOfWork`]: the gateway hands
//! out a signed puzzle (`GET /v1/sales/{sale}/challenge`), the client finds a nonce whose hash
//! with the puzzle has `difficulty` leading zero bits, and the gateway checks that in one hash.
//! The hash is MD5, the one an edge can compute (nginx's `secure_link_md5`): the answer carries
//! it (`<puzzle>~<nonce>~<proof>`), so the shipped edge tells solved puzzles from a stranger's
//! junk before any gateway hears of either, and counts only the junk against its address
//! (`deploy/nginx/cdn.conf`). MD5's collisions do not matter here: leading zero bits are found
//! only by trying nonce after nonce.
//! Raising the difficulty during an attack (the ops API) makes every join cost a bot twice the
//! work per bit, and a person's browser a fraction of a second more.
//!
//! A puzzle is stateless (a MAC under a key every gateway derives from the signing key, like
//! resume tokens) and the same for everyone who asks for a sale's puzzle at one difficulty within
//! one [`PUZZLE_WINDOW_MS`]: asking again, from any address, gets nothing new, so handing puzzles
//! out needs no allowance per address and an edge may cache them. What is spent is the answer:
//! each solution (a puzzle and a nonce) joins once, and the gateway records it in Redis until the
//! puzzle expires ([`Passed::single_use`]). Every solution costs its own search, so the work a
//! join costs is the same as with a puzzle apiece; a client searches from a random nonce of its
//! own, or it would find the same solution as its neighbours.

use std::future::Future;
use std::pin::Pin;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use md5::Md5;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::api::code;
use crate::UnixMillis;

mod difficulty;
pub use difficulty::{check_difficulty, AutoDifficulty};

/// The longest answer read (a CAPTCHA response token is usually well under 2 KB).
pub const MAX_ANSWER_LEN: usize = 4096;
/// How long a puzzle may be answered after its window began.
pub const PUZZLE_LIFETIME_MS: i64 = 120_000;
/// Everyone asking for a sale's puzzle within one window of this length (aligned to the Unix
/// epoch) gets the same puzzle.
pub const PUZZLE_WINDOW_MS: i64 = 5_000;

/// Why an answer was refused; each has its own error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    #[error("this sale asks for a challenge: fetch one from /v1/sales/{{sale}}/challenge, solve it and join with &challenge=<answer>")]
    Required,
    #[error("the challenge answer is wrong")]
    Failed,
    #[error("the challenge is no longer valid (too old, or easier than the sale now asks); fetch a new one")]
    Expired,
    #[error(
        "this answer was already used; solve the puzzle again from a random nonce of your own"
    )]
    Reused,
    #[error("the challenge cannot be checked right now; retry shortly")]
    Unavailable,
}

impl ChallengeError {
    pub fn code(self) -> &'static str {
        match self {
            ChallengeError::Required => code::CHALLENGE_REQUIRED,
            ChallengeError::Failed => code::CHALLENGE_FAILED,
            ChallengeError::Expired => code::CHALLENGE_EXPIRED,
            ChallengeError::Reused => code::CHALLENGE_REUSED,
            ChallengeError::Unavailable => code::CHALLENGE_UNAVAILABLE,
        }
    }
}

/// What a passed check leaves for the gateway to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passed {
    /// The answer (the puzzle and its nonce) may be used once: the gateway records this id
    /// (spread over Redis' slots)
    /// until the given Unix ms, and refuses it as [`ChallengeError::Reused`] meanwhile. `None`
    /// when the verifier's provider enforces single use itself.
    pub single_use: Option<(String, UnixMillis)>,
}

/// The sale's check, as the gateway asks it. A CAPTCHA provider's implementation would post the
/// answer to the provider's verification endpoint.
pub trait ChallengeVerifier: Send + Sync {
    /// Checks `answer`, sent to join `sale`, whose current difficulty is `difficulty`.
    fn verify<'a>(
        &'a self,
        sale: &'a str,
        answer: &'a str,
        difficulty: u8,
        now_ms: UnixMillis,
    ) -> Pin<Box<dyn Future<Output = Result<Passed, ChallengeError>> + Send + 'a>>;
}

/// A puzzle as handed to a client.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Puzzle {
    /// `"pow"`.
    pub kind: String,
    /// The puzzle; the answer is `<puzzle>~<nonce>~<proof>` ([`ProofOfWork::solve`]).
    pub puzzle: String,
    /// Leading zero bits MD5(`<puzzle>~<nonce>`) must have.
    pub difficulty: u8,
    /// Answer before this, Unix ms.
    pub expires_at_ms: UnixMillis,
}

/// `GET /v1/sales/{sale}/challenge`: what a client must solve before it joins, if anything.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChallengeOffer {
    /// The sale asks for no bot check: join straight away.
    None,
    /// A proof of work: find a nonce (1 to 64 of `A-Z a-z 0-9 - _`) such that
    /// MD5(`<puzzle>~<nonce>`) has `difficulty` leading zero bits, and join with
    /// `challenge=<puzzle>~<nonce>~<proof>` before `expires_at_ms`, the proof that MD5 in
    /// unpadded base64url.
    Pow {
        puzzle: String,
        difficulty: u8,
        /// Unix milliseconds.
        #[schema(value_type = i64)]
        expires_at_ms: UnixMillis,
    },
}

impl From<Puzzle> for ChallengeOffer {
    fn from(puzzle: Puzzle) -> Self {
        ChallengeOffer::Pow {
            puzzle: puzzle.puzzle,
            difficulty: puzzle.difficulty,
            expires_at_ms: puzzle.expires_at_ms,
        }
    }
}

/// The built-in proof of work.
#[derive(Clone)]
pub struct ProofOfWork {
    key: [u8; 32],
}

const VERSION: &str = "p3";

impl ProofOfWork {
    /// Derives the puzzles' MAC key from the admission signing seed every gateway holds
    /// (domain-separated, so it reveals nothing about the signing key).
    pub fn derive(signing_seed: &[u8]) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"floodgate challenge key v1\0");
        hasher.update(signing_seed);
        Self {
            key: hasher.finalize().into(),
        }
    }

    /// The puzzle for `sale` at `difficulty` at `now_ms`: the same for every ask in the window.
    pub fn issue(&self, sale: &str, difficulty: u8, now_ms: UnixMillis) -> Puzzle {
        let window = now_ms - now_ms.rem_euclid(PUZZLE_WINDOW_MS);
        let body = format!("{VERSION}~{sale}~{window}~{difficulty}");
        let mac = B64.encode(self.mac(&body));
        Puzzle {
            kind: "pow".into(),
            puzzle: format!("{body}~{mac}"),
            difficulty,
            expires_at_ms: window + PUZZLE_LIFETIME_MS,
        }
    }

    fn mac(&self, body: &str) -> [u8; 16] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(body.as_bytes());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// The check, without the future around it.
    pub fn check(
        &self,
        sale: &str,
        answer: &str,
        difficulty: u8,
        now_ms: UnixMillis,
    ) -> Result<Passed, ChallengeError> {
        if answer.len() > MAX_ANSWER_LEN {
            return Err(ChallengeError::Failed);
        }
        let (solved, proof) = answer.rsplit_once('~').ok_or(ChallengeError::Failed)?;
        let (puzzle, _nonce) = solved.rsplit_once('~').ok_or(ChallengeError::Failed)?;
        let (body, mac) = puzzle.rsplit_once('~').ok_or(ChallengeError::Failed)?;
        let mac = B64.decode(mac).map_err(|_| ChallengeError::Failed)?;
        if !crate::same_secret(&mac, &self.mac(body)) {
            return Err(ChallengeError::Failed);
        }
        // Genuine from here on: the fields are ours.
        let fields: Vec<&str> = body.split('~').collect();
        let [VERSION, for_sale, issued, asked] = fields[..] else {
            return Err(ChallengeError::Failed);
        };
        let issued: UnixMillis = issued.parse().map_err(|_| ChallengeError::Failed)?;
        let asked: u8 = asked.parse().map_err(|_| ChallengeError::Failed)?;
        if for_sale != sale {
            return Err(ChallengeError::Failed);
        }
        let expires = issued + PUZZLE_LIFETIME_MS;
        if now_ms >= expires || asked < difficulty {
            return Err(ChallengeError::Expired);
        }
        // The proof is the hash, written out: an answer whose proof is not its own would pass
        // the edge's check for nothing.
        let hash = Md5::digest(solved.as_bytes());
        if proof != B64.encode(hash) || leading_zero_bits(&hash) < u32::from(asked) {
            return Err(ChallengeError::Failed);
        }
        // The answer, not the puzzle: everyone in a window shares the puzzle.
        Ok(Passed {
            single_use: Some((hex::encode(hash), expires)),
        })
    }

    /// Finds an answer to `puzzle` (what a client does; the tests and the load generator use
    /// it), searching from a random nonce so that it is not a neighbour's: `<puzzle>~<nonce>~
    /// <proof>`.
    pub fn solve(puzzle: &Puzzle) -> String {
        let start = rand::rngs::OsRng.next_u64();
        let prefix = Md5::new_with_prefix(format!("{}~", puzzle.puzzle));
        (0u64..)
            .find_map(|n| {
                let nonce = format!("{start:016x}{n:x}");
                let hash = prefix.clone().chain_update(&nonce).finalize();
                (leading_zero_bits(&hash) >= u32::from(puzzle.difficulty))
                    .then(|| format!("{}~{nonce}~{}", puzzle.puzzle, B64.encode(hash)))
            })
            .expect("some nonce solves any puzzle of at most 32 bits")
    }
}

impl ChallengeVerifier for ProofOfWork {
    fn verify<'a>(
        &'a self,
        sale: &'a str,
        answer: &'a str,
        difficulty: u8,
        now_ms: UnixMillis,
    ) -> Pin<Box<dyn Future<Output = Result<Passed, ChallengeError>> + Send + 'a>> {
        Box::pin(std::future::ready(
            self.check(sale, answer, difficulty, now_ms),
        ))
    }
}

fn leading_zero_bits(hash: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in hash {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solved_puzzle_passes_once_per_id_and_every_flaw_is_refused() {
        let pow = ProofOfWork::derive(&[7; 32]);
        let now = 1_000_000;
        let puzzle = pow.issue("s1", 8, now);
        let answer = ProofOfWork::solve(&puzzle);
        let passed = pow.check("s1", &answer, 8, now + 10).unwrap();
        let (id, until) = passed.single_use.unwrap();
        assert_eq!(until, now + PUZZLE_LIFETIME_MS);
        assert_eq!(id.len(), 32);
        assert_eq!(
            pow.check("s1", &answer, 8, now)
                .unwrap()
                .single_use
                .unwrap()
                .0,
            id
        );
        // The same puzzle solved again (another search, another nonce) is another answer: the
        // puzzle is everyone's in its window, and each answer is single-use on its own.
        let again = ProofOfWork::solve(&puzzle);
        assert_ne!(again, answer, "each search starts from a random nonce");
        assert_ne!(
            pow.check("s1", &again, 8, now)
                .unwrap()
                .single_use
                .unwrap()
                .0,
            id
        );

        assert_eq!(
            pow.check("s2", &answer, 8, now),
            Err(ChallengeError::Failed)
        );
        assert_eq!(
            pow.check("s1", &answer, 8, now + PUZZLE_LIFETIME_MS),
            Err(ChallengeError::Expired)
        );
        assert_eq!(
            pow.check("s1", &answer, 9, now),
            Err(ChallengeError::Expired),
            "the sale asks for more now than the puzzle did"
        );
        let wrong = (0u64..)
            .map(|n| format!("{}~{n:x}", puzzle.puzzle))
            .map(|solved| (Md5::digest(solved.as_bytes()), solved))
            .find(|(hash, _)| leading_zero_bits(hash) < 8)
            .map(|(hash, solved)| format!("{solved}~{}", B64.encode(hash)))
            .unwrap();
        assert_eq!(pow.check("s1", &wrong, 8, now), Err(ChallengeError::Failed));
        // A solution whose proof is not its hash, or has none: the edge would have counted it as
        // work done, so the gateway refuses it.
        let (solved, proof) = answer.rsplit_once('~').unwrap();
        let other_proof = format!("{solved}~{}", B64.encode([0u8; 16]));
        assert_ne!(other_proof, answer);
        assert_eq!(
            pow.check("s1", &other_proof, 8, now),
            Err(ChallengeError::Failed)
        );
        assert_eq!(pow.check("s1", solved, 8, now), Err(ChallengeError::Failed));
        assert_eq!(proof.len(), 22, "an MD5 in unpadded base64url");
        // A puzzle made up by the client, easier than asked: its MAC gives it away.
        let forged = answer.replacen("~8~", "~1~", 1);
        assert_eq!(
            pow.check("s1", &forged, 1, now),
            Err(ChallengeError::Failed)
        );
        let stranger = ProofOfWork::derive(&[8; 32]);
        assert_eq!(
            stranger.check("s1", &answer, 8, now),
            Err(ChallengeError::Failed)
        );
        assert_eq!(pow.check("s1", "", 8, now), Err(ChallengeError::Failed));
        assert_eq!(
            pow.check("s1", &"~".repeat(5000), 8, now),
            Err(ChallengeError::Failed)
        );
    }

    #[test]
    fn everyone_asking_in_one_window_gets_the_same_puzzle() {
        let pow = ProofOfWork::derive(&[7; 32]);
        let start = 10 * PUZZLE_WINDOW_MS;
        let first = pow.issue("s1", 8, start);
        assert_eq!(pow.issue("s1", 8, start + PUZZLE_WINDOW_MS - 1), first);
        assert_eq!(first.expires_at_ms, start + PUZZLE_LIFETIME_MS);
        assert_ne!(pow.issue("s1", 8, start + PUZZLE_WINDOW_MS), first);
        assert_ne!(pow.issue("s1", 9, start), first);
        assert_ne!(pow.issue("s2", 8, start), first);
    }

    #[test]
    fn leading_zero_bits_count_from_the_first_byte() {
        assert_eq!(leading_zero_bits(&[0, 0x10]), 11);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
    }
}
