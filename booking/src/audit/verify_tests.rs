//! The walk's rules on chains made in memory: each attack a holder of a retired key (or of no
//! key) could try, and the rotations and upgrades that must still check.

use secrecy::SecretString;
use serde_json::json;

use super::*;
use crate::audit::keys::{AuditKey, NO_SALE};

fn key(fill: &str) -> AuditKey {
    AuditKey::new(&SecretString::from(fill.repeat(32) + "-k")).unwrap()
}

fn keys(current: &str, previous: &[&str]) -> AuditKeys {
    AuditKeys {
        current: key(current),
        previous: previous.iter().map(|p| key(p)).collect(),
    }
}

/// A chain made in memory: each row and its MAC.
#[derive(Clone, Default)]
struct Chain(Vec<(Row, String)>);

impl Chain {
    fn previous(&self, at: usize) -> String {
        if at == 0 {
            Legacy::default().genesis()
        } else {
            self.0[at - 1].1.clone()
        }
    }

    fn row(id: i64, action: &str, key_id: Option<&str>) -> Row {
        Row {
            id,
            at: time::OffsetDateTime::from_unix_timestamp(1_800_000_000 + id).unwrap(),
            sale: "s".into(),
            action: action.into(),
            actor: "alice".into(),
            phase: "done".into(),
            intent: None,
            before: json!({ "paused": false, "admission_rate": 5.0 }),
            after: json!({ "paused": true }),
            detail: json!({}),
            key_id: key_id.map(str::to_owned),
        }
    }

    /// Appends a row made with `with`, named (or not, as a row of an older release).
    fn push(&mut self, with: &AuditKey, named: bool) -> &mut Self {
        let id = self.0.len() as i64 + 1;
        let row = Self::row(id, "pause", named.then_some(with.id()));
        let mac = row.mac(with, &self.previous(self.0.len()));
        self.0.push((row, mac));
        self
    }

    /// Appends a rotation from `from` to `to`, its handover made with `handing`.
    fn rotate(&mut self, from: &AuditKey, to: &AuditKey, handing: &AuditKey) -> &mut Self {
        let id = self.0.len() as i64 + 1;
        let previous = self.previous(self.0.len());
        let mut row = Self::row(id, ROTATE, Some(to.id()));
        row.sale = NO_SALE.into();
        row.detail = json!({
            "from": from.id(), "to": to.id(), "handover": handing.handover(&previous, to.id()),
        });
        let mac = row.mac(to, &previous);
        self.0.push((row, mac));
        self
    }

    /// Row `at` (from 0) edited and made again with `with`, and every row after it up to `upto`
    /// (exclusive) re-made with `with` too: what a key's holder with database access can do.
    fn rewrite(&mut self, at: usize, upto: usize, with: &AuditKey) {
        self.0[at].0.actor = "mallory".into();
        for i in at..upto {
            let previous = self.previous(i);
            self.0[i].1 = self.0[i].0.mac(with, &previous);
        }
    }

    fn walk(&self, keys: &AuditKeys) -> Verdict {
        let mut walk = Walk::new(keys);
        for (row, mac) in &self.0 {
            walk.row(row, Some(mac));
        }
        walk.verdict
    }
}

/// Rows under a, a rotation to b, rows under b.
fn rotated() -> Chain {
    let (a, b) = (key("a"), key("b"));
    let mut chain = Chain::default();
    chain.push(&a, true).push(&a, true).rotate(&a, &b, &a);
    chain.push(&b, true).push(&b, true);
    chain
}

#[test]
fn a_rotated_chain_checks_with_each_key_in_force_at_its_position() {
    let verdict = rotated().walk(&keys("b", &["a"]));
    assert!(verdict.intact(&keys("b", &["a"])), "{verdict:?}");
    assert_eq!(verdict.chained, 5);
    assert_eq!(verdict.in_force.as_deref(), Some(key("b").id()));
    assert_eq!(
        verdict.rotations,
        [(3, key("a").id().to_owned(), key("b").id().to_owned())]
    );
    // Without the old key, its rows (and the handover) cannot be checked.
    let verdict = rotated().walk(&keys("b", &[]));
    assert_eq!(
        verdict.broken.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[test]
fn a_retired_key_signs_nothing_after_its_rotation() {
    let mut chain = rotated();
    chain.push(&key("a"), true);
    let verdict = chain.walk(&keys("b", &["a"]));
    assert_eq!(verdict.broken.len(), 1, "{verdict:?}");
    assert_eq!(verdict.broken[0].0, 6);
    assert!(verdict.broken[0].1.contains("retired"), "{verdict:?}");
}

#[test]
fn a_retired_key_cannot_rewrite_a_row_after_its_rotation() {
    // Re-made with the retired key but still naming the key in force.
    let mut chain = rotated();
    chain.rewrite(4, 5, &key("a"));
    let verdict = chain.walk(&keys("b", &["a"]));
    assert_eq!(verdict.broken.first().map(|b| b.0), Some(5), "{verdict:?}");
}

#[test]
fn a_retired_key_cannot_rewrite_history_before_its_rotation() {
    // Row 2 edited, re-made with a (in force there), and the rotation row re-made with a too:
    // the rotation is made with b, so it breaks.
    let mut chain = rotated();
    chain.rewrite(1, 3, &key("a"));
    let verdict = chain.walk(&keys("b", &["a"]));
    assert_eq!(verdict.broken.first().map(|b| b.0), Some(3), "{verdict:?}");
    assert!(!verdict.intact(&keys("b", &["a"])));
}

#[test]
fn a_rotation_needs_the_old_keys_handover() {
    // Whoever holds b but not a cannot take the chain over from a.
    let (a, b) = (key("a"), key("b"));
    let mut chain = Chain::default();
    chain.push(&a, true).rotate(&a, &b, &b).push(&b, true);
    let verdict = chain.walk(&keys("b", &["a"]));
    // The forged rotation is named, and b's rows after it, which a never handed over to.
    assert_eq!(verdict.broken.first().map(|b| b.0), Some(2), "{verdict:?}");
    assert!(verdict.broken[0].1.contains("handover"), "{verdict:?}");
    assert!(!verdict.intact(&keys("b", &["a"])));
    // Nor rotate from a key that was not in force.
    let c = key("c");
    let mut chain = Chain::default();
    chain.push(&a, true).rotate(&c, &b, &c);
    let verdict = chain.walk(&keys("b", &["a", "c"]));
    assert!(verdict.broken[0].1.contains("was in force"), "{verdict:?}");
}

#[test]
fn a_chain_cut_back_and_continued_with_a_retired_key_is_not_intact() {
    // Rows 3 on (the rotation and b's rows) deleted, the chain continued with a: every row
    // checks, but the head is under a key the current one replaced.
    let a = key("a");
    let mut chain = rotated();
    chain.0.truncate(2);
    chain.push(&a, true);
    let keys = keys("b", &["a"]);
    let verdict = chain.walk(&keys);
    assert!(verdict.broken.is_empty(), "{verdict:?}");
    assert_eq!(verdict.head_behind(&keys), Some(a.id()));
    assert!(!verdict.intact(&keys));
}

#[test]
fn rows_chained_before_keys_were_named_still_check_and_none_may_follow_a_named_one() {
    let (a, b) = (key("a"), key("b"));
    let mut chain = Chain::default();
    chain.push(&a, false).push(&a, false).push(&b, true);
    let verdict = chain.walk(&keys("b", &["a"]));
    assert!(verdict.intact(&keys("b", &["a"])), "{verdict:?}");
    chain.push(&b, false);
    let verdict = chain.walk(&keys("b", &["a"]));
    assert_eq!(verdict.broken.len(), 1, "{verdict:?}");
    assert!(verdict.broken[0].1.contains("names no key"), "{verdict:?}");
}

#[test]
fn a_retired_key_cannot_strip_the_names_and_make_the_whole_chain_again() {
    // Every row's key name taken off, a row edited, and the whole chain made again with a, as
    // rows of a release before keys were named. Before, every row checked under "any key given"
    // and nothing was in force: intact. Now the key that made an unnamed row is in force after
    // it, and the head is under a, which b replaced.
    let a = key("a");
    let mut chain = rotated();
    for (row, _) in &mut chain.0 {
        row.key_id = None;
    }
    let len = chain.0.len();
    chain.rewrite(0, len, &a);
    let keys = keys("b", &["a"]);
    let verdict = chain.walk(&keys);
    assert!(verdict.broken.is_empty(), "every row checks: {verdict:?}");
    assert_eq!(verdict.head_behind(&keys), Some(a.id()), "{verdict:?}");
    assert!(!verdict.intact(&keys));
    // Unnamed rows under the current key are intact, as an upgraded trail's are.
    let mut legacy = Chain::default();
    legacy.push(&key("b"), false).push(&key("b"), false);
    assert!(legacy.walk(&keys).intact(&keys));
}

#[test]
fn every_field_the_key_and_the_row_before_are_in_the_mac() {
    let (a, b) = (key("a"), key("b"));
    let row = Chain::row(7, "pause", Some(a.id()));
    let mac = row.mac(&a, "previous");
    assert_eq!(mac, row.mac(&a, "previous"));
    assert_ne!(mac, row.mac(&a, "another"));
    assert_ne!(mac, row.mac(&b, "previous"));
    let mut edited = row.clone();
    edited.actor = "mallory".into();
    assert_ne!(mac, edited.mac(&a, "previous"));
    let mut edited = row.clone();
    edited.after = json!({ "paused": false });
    assert_ne!(mac, edited.mac(&a, "previous"));
    let mut renamed = row.clone();
    renamed.key_id = Some(b.id().to_owned());
    assert_ne!(mac, renamed.mac(&a, "previous"));
    // jsonb reorders an object's keys: the order does not change the MAC.
    let mut reordered = row.clone();
    reordered.before = json!({ "admission_rate": 5.0, "paused": false });
    assert_eq!(mac, reordered.mac(&a, "previous"));
}
