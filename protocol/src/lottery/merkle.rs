//! The batches' Merkle trees (RFC 6962, with RFC 9162's audit path check): how each person
//! checks their own nonce was counted in the draw.

use sha2::{Digest, Sha256};

/// The leaf of `nonce` in its batch's tree: RFC 6962's SHA-256(0x00 || nonce as ASCII).
pub fn leaf_hash(nonce: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(nonce.as_bytes());
    hasher.finalize().into()
}

pub(super) fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// The largest power of two smaller than `n` (`n >= 2`): where RFC 6962 splits a tree.
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// RFC 6962's Merkle tree hash of a batch's leaves (in ticket order).
pub fn merkle_root(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => Sha256::digest([]).into(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&merkle_root(&leaves[..k]), &merkle_root(&leaves[k..]))
        }
    }
}

/// RFC 6962's audit path of leaf `index` in a batch: the sibling hashes from the leaf up.
pub fn inclusion_path(leaves: &[[u8; 32]], index: usize) -> Vec<[u8; 32]> {
    let n = leaves.len();
    if n <= 1 || index >= n {
        return Vec::new();
    }
    let k = split(n);
    if index < k {
        let mut path = inclusion_path(&leaves[..k], index);
        path.push(merkle_root(&leaves[k..]));
        path
    } else {
        let mut path = inclusion_path(&leaves[k..], index - k);
        path.push(merkle_root(&leaves[..k]));
        path
    }
}

/// The root an audit path leads to from `leaf` at `index` of a batch of `size` (RFC 9162,
/// 2.1.3.2), or `None` if the path cannot belong to such a tree.
pub fn root_from_path(
    leaf: [u8; 32],
    index: u64,
    size: u64,
    path: &[[u8; 32]],
) -> Option<[u8; 32]> {
    if index >= size {
        return None;
    }
    let (mut node, mut last, mut hash) = (index, size - 1, leaf);
    for sibling in path {
        if last == 0 {
            return None;
        }
        if node & 1 == 1 || node == last {
            hash = node_hash(sibling, &hash);
            if node & 1 == 0 {
                while node & 1 == 0 && node != 0 {
                    node >>= 1;
                    last >>= 1;
                }
            }
        } else {
            hash = node_hash(&hash, sibling);
        }
        node >>= 1;
        last >>= 1;
    }
    (last == 0).then_some(hash)
}
