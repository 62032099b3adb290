//! A sale file (TOML, see `deploy/sales/demo.toml`): what it declares and what it must say.

use floodgate_protocol::ids::{check_pool_id, check_sale_id};
use floodgate_protocol::settings::{self, ChallengeRule, Door, IdentityRule};
use serde::Deserialize;
use time::macros::format_description;
use time::OffsetDateTime;

use super::CatalogError;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaleFile {
    pub id: String,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub opens_at: OffsetDateTime,
    pub hold_ttl_secs: u32,
    pub token_ttl_secs: u32,
    pub max_seats_per_booking: u32,
    pub admission_rate: f64,
    pub active_cap: u32,
    /// Admitted users with an unspent token allowed per available seat (default 2.0): the
    /// controller never lets more in than `stock_factor x available`, so people are not
    /// admitted to a sold-out page.
    #[serde(default = "default_stock_factor")]
    pub stock_factor: f64,
    /// How long an unspent pass counts against the stock, 1 second to `token_ttl_secs`
    /// (default: the pass's whole life). Shorter, the passes of people who never book (a
    /// stranger's idle places, walk-aways) stop holding the last seats from the people behind
    /// sooner, while each pass stays valid for its life; someone who books later than this may
    /// find the stock gone.
    #[serde(default)]
    pub stock_hold_secs: Option<u32>,
    /// Who may join: `optional` (default; a join with an identity token is a buyer, one place
    /// per buyer) or `required` (signed-in buyers only).
    #[serde(default = "default_identity")]
    pub identity: String,
    /// Most seats one buyer may hold or have bought in this sale, over all their reservations
    /// (default: no limit beyond one reservation per place in line).
    #[serde(default)]
    pub max_seats_per_buyer: Option<u32>,
    /// The bot check at the door: `none` (default) or `pow` (proof of work).
    #[serde(default = "default_challenge")]
    pub challenge: String,
    /// Leading zero bits of the proof of work (default 16: a tenth of a second in a browser).
    #[serde(default = "default_difficulty")]
    pub pow_difficulty: u8,
    /// How long a departed client keeps its place, 5 to 3600 seconds (default: the gateways'
    /// `FLOODGATE_GRACE_MS`, 30 s). Longer for buyers on phones, whose app is suspended in the
    /// background.
    #[serde(default)]
    pub grace_secs: Option<u32>,
    #[serde(default)]
    pub classes: Vec<ClassDef>,
    #[serde(default)]
    pub trains: Vec<TrainDef>,
    pub pools: Vec<PoolDef>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassDef {
    pub code: String,
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainDef {
    pub id: String,
    pub name: String,
    pub origin: String,
    pub destination: String,
    pub departs: String,
    pub arrives: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolDef {
    pub id: String,
    pub train: String,
    /// Travel date, `YYYY-MM-DD`.
    pub date: String,
    pub class: String,
    #[serde(default = "general_quota")]
    pub quota: String,
    pub capacity: u32,
    /// Fare per seat in the currency's minor unit (paise for INR).
    pub fare_minor: i64,
    #[serde(default = "default_currency")]
    pub currency: String,
}

fn general_quota() -> String {
    "GN".into()
}

fn default_stock_factor() -> f64 {
    2.0
}

fn default_identity() -> String {
    IdentityRule::default().as_str().into()
}

fn default_challenge() -> String {
    ChallengeRule::default().as_str().into()
}

fn default_difficulty() -> u8 {
    floodgate_protocol::settings::DEFAULT_POW_DIFFICULTY
}

fn default_currency() -> String {
    "INR".into()
}

impl SaleFile {
    pub fn parse(text: &str) -> Result<Self, CatalogError> {
        let sale: SaleFile = toml::from_str(text)?;
        sale.validate()?;
        Ok(sale)
    }

    /// Everything the database constraints would refuse, said in the file's own terms.
    pub(super) fn validate(&self) -> Result<(), CatalogError> {
        let invalid = |m: String| Err(CatalogError::Invalid(m));
        check_sale_id(&self.id).map_err(|e| CatalogError::Invalid(e.to_string()))?;
        // The list of sales is `/data/sales/index.json`, beside each sale's own document.
        if self.id == "index" {
            return invalid(
                "a sale cannot be called \"index\" (the list of sales has that name)".into(),
            );
        }
        if self.hold_ttl_secs == 0 {
            return invalid("hold_ttl_secs must be positive".into());
        }
        settings::check_token_ttl_secs(self.token_ttl_secs).map_err(CatalogError::Invalid)?;
        if !(1..=16).contains(&self.max_seats_per_booking) {
            return invalid("max_seats_per_booking must be between 1 and 16".into());
        }
        settings::check_admission_rate(self.admission_rate).map_err(CatalogError::Invalid)?;
        settings::check_active_cap(u64::from(self.active_cap)).map_err(CatalogError::Invalid)?;
        if !(self.stock_factor.is_finite() && self.stock_factor > 0.0) {
            return invalid("stock_factor must be a positive number".into());
        }
        if let Some(hold) = self.stock_hold_secs {
            settings::check_stock_hold_secs(hold, self.token_ttl_secs)
                .map_err(CatalogError::Invalid)?;
        }
        self.door()?;
        if self.pools.is_empty() {
            return invalid("a sale needs at least one pool".into());
        }
        let mut seen = std::collections::HashSet::new();
        for pool in &self.pools {
            check_pool_id(&pool.id).map_err(|e| CatalogError::Invalid(e.to_string()))?;
            if !seen.insert(&pool.id) {
                return invalid(format!("pool {:?} is declared twice", pool.id));
            }
            if pool.capacity == 0 || pool.fare_minor < 0 {
                return invalid(format!(
                    "pool {:?} needs a positive capacity and a non-negative fare",
                    pool.id
                ));
            }
            parse_date(&pool.date)?;
        }
        Ok(())
    }
}

impl SaleFile {
    /// The sale's door, checked.
    pub fn door(&self) -> Result<Door, CatalogError> {
        door_from(
            &self.identity,
            &self.challenge,
            i64::from(self.pow_difficulty),
            self.max_seats_per_buyer.map(i64::from),
            self.grace_secs.map(i64::from),
        )
    }
}

/// A door from its settings as the file and the catalog keep them.
pub(super) fn door_from(
    identity: &str,
    challenge: &str,
    pow_difficulty: i64,
    max_seats_per_buyer: Option<i64>,
    grace_secs: Option<i64>,
) -> Result<Door, CatalogError> {
    let identity = IdentityRule::parse(identity).map_err(CatalogError::Invalid)?;
    if max_seats_per_buyer.is_some() && identity != IdentityRule::Required {
        // An anonymous pass names no buyer, so its seats could not be counted.
        return Err(CatalogError::Invalid(
            "max_seats_per_buyer needs identity = \"required\": seats can be counted per buyer \
             only when every pass names one"
                .into(),
        ));
    }
    Ok(Door {
        identity,
        challenge: ChallengeRule::parse(challenge).map_err(CatalogError::Invalid)?,
        pow_difficulty: floodgate_protocol::challenge::check_difficulty(pow_difficulty)
            .map_err(CatalogError::Invalid)?,
        max_seats_per_buyer: max_seats_per_buyer
            .map(settings::check_seats_per_buyer)
            .transpose()
            .map_err(CatalogError::Invalid)?,
        grace_secs: grace_secs
            .map(settings::check_grace_secs)
            .transpose()
            .map_err(CatalogError::Invalid)?,
    })
}

pub(super) fn parse_date(text: &str) -> Result<time::Date, CatalogError> {
    time::Date::parse(text, format_description!("[year]-[month]-[day]"))
        .map_err(|_| CatalogError::Invalid(format!("date {text:?} is not YYYY-MM-DD")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        id = "s1"
        name = "Test"
        opens_at = "2026-12-01T04:30:00Z"
        hold_ttl_secs = 300
        token_ttl_secs = 120
        max_seats_per_booking = 4
        admission_rate = 10.0
        active_cap = 100
        [[pools]]
        id = "p1"
        train = "12951"
        date = "2026-12-01"
        class = "3A"
        capacity = 10
        fare_minor = 100
    "#;

    #[test]
    fn the_shipped_sale_files_are_valid() {
        for text in [
            include_str!("../../../deploy/sales/demo.toml"),
            include_str!("../../../deploy/sales/bench.toml"),
        ] {
            let sale = SaleFile::parse(text).unwrap();
            assert!(!sale.pools.is_empty());
        }
    }

    #[test]
    fn a_minimal_sale_file_parses_with_defaults() {
        let sale = SaleFile::parse(MINIMAL).unwrap();
        assert_eq!(sale.pools[0].quota, "GN");
        assert_eq!(sale.pools[0].currency, "INR");
    }

    #[test]
    fn invalid_sale_files_say_what_is_wrong() {
        let cases = [
            (MINIMAL.replace("capacity = 10", "capacity = 0"), "capacity"),
            // Its catalog would be the list of sales' name.
            (
                MINIMAL.replacen("id = \"s1\"", "id = \"index\"", 1),
                "index",
            ),
            (MINIMAL.replace("\"2026-12-01\"", "\"1 Dec\""), "YYYY-MM-DD"),
            (MINIMAL.replace("id = \"p1\"", "id = \"p{1}\""), "pool id"),
            (
                MINIMAL.replace("admission_rate = 10.0", "admission_rate = 0.0"),
                "admission_rate",
            ),
            (
                MINIMAL.replace("max_seats_per_booking = 4", "max_seats_per_booking = 40"),
                "max_seats",
            ),
            // Defect 4: a rate the controller cannot pace by.
            (
                MINIMAL.replace("admission_rate = 10.0", "admission_rate = 1e-20"),
                "admission_rate",
            ),
            (
                MINIMAL.replace("admission_rate = 10.0", "admission_rate = 1e9"),
                "admission_rate",
            ),
            // Defect 9: a token that outlives what its claim can cover.
            (
                MINIMAL.replace("token_ttl_secs = 120", "token_ttl_secs = 86400"),
                "token_ttl_secs",
            ),
            (
                MINIMAL.replace("token_ttl_secs = 120", "token_ttl_secs = 0"),
                "token_ttl_secs",
            ),
            // A pass cannot hold the stock longer than it lives, nor not at all.
            (
                MINIMAL.replace(
                    "token_ttl_secs = 120",
                    "token_ttl_secs = 120\nstock_hold_secs = 121",
                ),
                "stock_hold_secs",
            ),
            (
                MINIMAL.replace(
                    "token_ttl_secs = 120",
                    "token_ttl_secs = 120\nstock_hold_secs = 0",
                ),
                "stock_hold_secs",
            ),
        ];
        for (text, expected) in cases {
            let err = SaleFile::parse(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
        assert!(matches!(
            SaleFile::parse("id = 3"),
            Err(CatalogError::Parse(_))
        ));
    }
}
