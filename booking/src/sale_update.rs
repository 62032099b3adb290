//! The body of `PATCH /admin/v1/sales/{sale}`, read field by field so each mistake is named.

use floodgate_protocol::api::code;
use floodgate_protocol::settings::ChallengeRule;

use floodgate_platform::http::{JsonObject, Shape};

use crate::autopilot::AutopilotUpdate;
use crate::error::ApiError;

/// Body of `PATCH /admin/v1/sales/{sale}`: the settings to change (at least one).
#[derive(Debug, Default, PartialEq, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
// documented as additionalProperties: false, as `read` is
// minProperties: 1 is set on the document (`crate::openapi`): utoipa 5.5 writes
// `min_properties` as maxProperties.
#[schema(
    example = json!({"admission_rate": 20.0, "active_cap": 500})
)]
pub struct SaleUpdate {
    /// Admissions per second (pause the sale to stop admission).
    #[schema(nullable = false, minimum = 0.001, maximum = 1_000_000.0)]
    pub admission_rate: Option<f64>,
    /// The most unspent tokens plus live holds at once.
    #[schema(nullable = false, minimum = 1, maximum = 10_000_000)]
    pub active_cap: Option<u32>,
    /// The bot check a join must pass.
    #[schema(nullable = false)]
    pub challenge: Option<ChallengeRule>,
    /// Leading zero bits of the proof of work.
    #[schema(nullable = false, minimum = 1, maximum = 32)]
    pub pow_difficulty: Option<u8>,
    /// The admission autopilot, on with its bounds or off.
    #[schema(nullable = false)]
    pub autopilot: Option<AutopilotUpdate>,
}

impl Shape for SaleUpdate {
    const EXAMPLE: &'static str = "{\"admission_rate\": 20.0, \"active_cap\": 500} (either)";
}

impl SaleUpdate {
    /// Reads the body's fields one by one, so each mistake gets its field's code
    /// (`invalid_rate`, `invalid_cap`) and a sentence for people rather than the JSON parser's
    /// wording. Every value is checked against the bounds the controller relies on
    /// ([`floodgate_protocol::settings`]).
    pub fn read(body: &JsonObject<SaleUpdate>) -> Result<Self, ApiError> {
        let mut update = SaleUpdate::default();
        for (name, value) in &body.fields {
            match name.as_str() {
                "admission_rate" => {
                    let rate = value
                        .as_f64()
                        .ok_or_else(|| String::from("admission_rate must be a number"))
                        .and_then(floodgate_protocol::settings::check_admission_rate)
                        .map_err(|m| ApiError::new(code::INVALID_RATE, m))?;
                    update.admission_rate = Some(rate);
                }
                "active_cap" => {
                    let cap = value
                        .as_u64()
                        .ok_or_else(|| String::from("active_cap must be a whole number"))
                        .and_then(floodgate_protocol::settings::check_active_cap)
                        .map_err(|m| ApiError::new(code::INVALID_CAP, m))?;
                    update.active_cap = Some(u32::try_from(cap).map_err(|_| {
                        ApiError::new(code::INVALID_CAP, "active_cap is too large".into())
                    })?);
                }
                "challenge" => {
                    let rule = value
                        .as_str()
                        .ok_or_else(|| String::from("challenge must be \"none\" or \"pow\""))
                        .and_then(ChallengeRule::parse)
                        .map_err(|m| ApiError::new(code::INVALID_REQUEST, m))?;
                    update.challenge = Some(rule);
                }
                "pow_difficulty" => {
                    let bits = value
                        .as_i64()
                        .ok_or_else(|| String::from("pow_difficulty must be a whole number of bits"))
                        .and_then(floodgate_protocol::challenge::check_difficulty)
                        .map_err(|m| ApiError::new(code::INVALID_DIFFICULTY, m))?;
                    update.pow_difficulty = Some(bits);
                }
                "autopilot" => update.autopilot = Some(AutopilotUpdate::read(value)?),
                other => {
                    return Err(ApiError::new(
                        code::INVALID_REQUEST,
                        format!("unknown field {other:?}: the sale's admission_rate, active_cap, challenge, pow_difficulty and autopilot can be changed"),
                    ))
                }
            }
        }
        if update == SaleUpdate::default() {
            return Err(ApiError::new(
                code::INVALID_REQUEST,
                "name admission_rate, active_cap, challenge, pow_difficulty or autopilot to change"
                    .into(),
            ));
        }
        Ok(update)
    }
}
