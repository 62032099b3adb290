//! The audit chain's keys (issue 48): each row names the key that made it, one key is in force
//! at a time, and `floodgate-booking audit rotate` hands the chain over. A process holding only
//! the retired key appends nothing; whoever keeps it with database access cannot cut the chain
//! back and continue it without `audit verify` saying so.

use floodgate_tests::secret;

use super::audit::app_with_a_pending_sale;

/// The audit key the services started with, and a new one to roll out.
struct Rollout {
    old: String,
    new: String,
}

impl Rollout {
    fn of(app: &floodgate_tests::TestApp) -> Self {
        Self {
            old: app.audit_key.clone(),
            new: secret("audit_"),
        }
    }

    /// The settings of a process holding the old key alone.
    fn with_old(&self) -> [(&str, &str); 1] {
        [("FLOODGATE_AUDIT_KEY", &self.old)]
    }

    /// The settings of a process given the new key, the old one among the previous.
    fn with_new(&self) -> [(&str, &str); 2] {
        [
            ("FLOODGATE_AUDIT_KEY", &self.new),
            ("FLOODGATE_AUDIT_PREVIOUS_KEYS", &self.old),
        ]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_hands_the_chain_over_and_the_retired_key_signs_nothing_after_it() {
    let (url, app, sale) = app_with_a_pending_sale().await;
    let keys = Rollout::of(&app);
    let (with_old, with_new) = (&keys.with_old()[..], &keys.with_new()[..]);
    let rows = || async {
        sqlx::query_as::<_, (i64, String, Option<String>)>(
            "select id, action, key_id from ops_audit order by id",
        )
        .fetch_all(&app.db)
        .await
        .unwrap()
    };

    // Rows under the first key name it.
    let (code, said) = app.booking_command(&url, &["sale", "arm", &sale]);
    assert_eq!(code, 0, "{said}");
    let before = rows().await;
    assert!(!before.is_empty());
    let old_id = before[0].2.clone().expect("a row names its key");
    assert!(
        before
            .iter()
            .all(|(_, _, key)| key.as_deref() == Some(&old_id)),
        "{before:?}"
    );

    // A service given the new key (and the old as previous) appends with the old one until the
    // rotation: nothing it writes is refused while the rollout is under way.
    let (code, said) = app.booking_command_with(&url, &["sale", "arm", &sale], with_new);
    assert!(code == 0 || code == 2, "{said}");
    let during = rows().await;
    assert!(during.len() > before.len(), "{during:?}");
    assert!(
        during
            .iter()
            .all(|(_, _, key)| key.as_deref() == Some(&old_id)),
        "{during:?}"
    );

    // The rotation: one row, made with the new key.
    let (code, said) = app.booking_command_with(&url, &["audit", "rotate"], with_new);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(&format!("from key {old_id}")), "{said}");
    let rotated = rows().await;
    let (rotation, action, new_id) = rotated.last().unwrap().clone();
    assert_eq!(action, "rotate_key");
    let new_id = new_id.unwrap();
    assert_ne!(new_id, old_id);
    // Rotating again writes nothing.
    let (code, said) = app.booking_command_with(&url, &["audit", "rotate"], with_new);
    assert_eq!(code, 0, "{said}");
    assert_eq!(rows().await.len(), rotated.len(), "{said}");

    // The retired key alone appends nothing: not a command, not the running service's ops API,
    // which answers 503 and changes nothing.
    let (code, said) = app.booking_command_with(&url, &["sale", "arm", &sale], with_old);
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains(&new_id),
        "the refusal names the key in force: {said}"
    );
    let (status, body) = app
        .ops(
            reqwest::Method::POST,
            &format!("/admin/v1/sales/{sale}/pause"),
            &app.ops_token,
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("catalog_unavailable")),
        "{body}"
    );
    assert_eq!(rows().await.len(), rotated.len());

    // The new key appends, and verify with both checks every row and names the rotation.
    let (code, said) = app.booking_command_with(&url, &["sale", "arm", &sale], with_new);
    assert!(code == 0 || code == 2, "{said}");
    let after = rows().await;
    assert!(after.len() > rotated.len());
    assert_eq!(after.last().unwrap().2.as_deref(), Some(new_id.as_str()));
    let (code, said) = app.booking_command_with(&url, &["audit", "verify"], with_new);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(&format!(
            "row {rotation} rotated the key from {old_id} to {new_id}"
        )),
        "{said}"
    );
    // The retired key alone does not vouch for the rows after it.
    let (code, said) = app.booking_command_with(&url, &["audit", "verify"], with_old);
    assert_eq!(code, 2, "{said}");

    // Whoever kept the retired key and has the database cuts the chain back to before the
    // rotation and continues it with the old key: every row checks, but verify with the current
    // key sees the head under a key it replaced.
    sqlx::query("delete from ops_audit where id >= $1")
        .bind(rotation)
        .execute(&app.db)
        .await
        .unwrap();
    let (code, said) = app.booking_command_with(&url, &["sale", "arm", &sale], with_old);
    assert!(
        code == 0 || code == 2,
        "the old key is in force again: {said}"
    );
    let (code, said) = app.booking_command_with(&url, &["audit", "verify"], with_new);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains(&format!("under key {old_id}")), "{said}");
}

/// A trail of an older release (rows that name no key) goes on under the key that made them, as
/// `audit verify` reads it, until a rotation hands it over: a service given a new key appends
/// with the old one, and `audit rotate` writes the handover. Before, the service appended with
/// the new key at once and `audit rotate` said the new key was in force already, while `audit
/// verify` (which puts an unnamed row's key in force) said the head was under the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_trail_goes_on_under_the_key_that_made_its_unnamed_rows() {
    use floodgate_booking::audit::head::Legacy;
    use floodgate_booking::audit::row::Row;
    use floodgate_booking::audit::AuditKey;

    let (url, app, sale) = app_with_a_pending_sale().await;
    let keys = Rollout::of(&app);
    let (with_old, with_new) = (&keys.with_old()[..], &keys.with_new()[..]);
    let (code, said) = app.booking_command_with(&url, &["sale", "arm", &sale], with_old);
    assert_eq!(code, 0, "{said}");
    // Made into an older release's trail: no key names, each MAC made again without one.
    let old_key = AuditKey::new(&secrecy::SecretString::from(keys.old.clone())).unwrap();
    let rows: Vec<Row> = sqlx::query_as(
        "select id, at, sale, action, actor, phase, intent, before, after, detail, key_id
         from ops_audit order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert!(!rows.is_empty());
    let mut previous = Legacy::default().genesis();
    for mut row in rows {
        row.key_id = None;
        let mac = row.mac(&old_key, &previous);
        sqlx::query("update ops_audit set key_id = null, mac = $2 where id = $1")
            .bind(row.id)
            .bind(&mac)
            .execute(&app.db)
            .await
            .unwrap();
        previous = mac;
    }
    let (code, said) = app.booking_command_with(&url, &["audit", "verify"], with_old);
    assert_eq!(code, 0, "an older release's trail: {said}");

    // The new key rolled out: rows go on under the old one, and the rotation hands over.
    let (code, said) = app.booking_command_with(&url, &["sale", "arm", &sale], with_new);
    assert!(code == 0 || code == 2, "{said}");
    let named: Vec<Option<String>> =
        sqlx::query_scalar("select key_id from ops_audit where key_id is not null order by id")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert!(!named.is_empty());
    assert!(
        named.iter().all(|k| k.as_deref() == Some(old_key.id())),
        "{named:?}"
    );
    let (code, said) = app.booking_command_with(&url, &["audit", "rotate"], with_new);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains(&format!("from key {}", old_key.id())),
        "{said}"
    );
    let (code, said) = app.booking_command_with(&url, &["audit", "verify"], with_new);
    assert_eq!(code, 0, "{said}");
}
