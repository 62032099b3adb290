//! One row of the audit trail as it is chained: its fields in a canonical form, and its MAC.

use serde_json::Value;

use super::keys::AuditKey;

/// What rows written before the chain existed carry instead of a MAC (the migration marks them).
pub const BEFORE_CHAIN: &str = "before-chain";

/// One row of the trail, as it is chained.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Row {
    pub id: i64,
    pub at: time::OffsetDateTime,
    pub sale: String,
    pub action: String,
    pub actor: String,
    pub phase: String,
    pub intent: Option<i64>,
    pub before: Value,
    pub after: Value,
    pub detail: Value,
    /// The id of the key that made the row's MAC; `None` for a row chained before rows named
    /// their keys.
    pub key_id: Option<String>,
}

impl Row {
    /// Every field, in a form that reads back the same from PostgreSQL: JSON with sorted keys
    /// (jsonb reorders them), the time in whole microseconds (PostgreSQL's precision).
    pub(super) fn canonical(&self) -> String {
        let micros = self.at.unix_timestamp_nanos() / 1_000;
        let mut fields = vec![
            self.id.into(),
            Value::String(micros.to_string()),
            Value::String(self.sale.clone()),
            Value::String(self.action.clone()),
            Value::String(self.actor.clone()),
            Value::String(self.phase.clone()),
            self.intent.map_or(Value::Null, Value::from),
            sorted(&self.before),
            sorted(&self.after),
            sorted(&self.detail),
        ];
        // Only a named row names its key, so a row chained before keys were named checks as
        // it did.
        if let Some(key) = &self.key_id {
            fields.push(Value::String(key.clone()));
        }
        Value::Array(fields).to_string()
    }

    /// The row's MAC under `key`, after the row whose MAC is `previous`.
    pub fn mac(&self, key: &AuditKey, previous: &str) -> String {
        key.mac(&[previous.as_bytes(), self.canonical().as_bytes()])
    }
}

/// `value` with every object's keys in order, whatever order they came in (serde_json keeps
/// insertion order in this build, utoipa turns on `preserve_order`; jsonb keeps its own).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}
