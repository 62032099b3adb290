//! What an overlay's `scale.yaml` already sets (`deploy/k8s/overlays/production/scale.yaml`):
//! the gateways' autoscaler's bounds and the booking and consumer replicas, so that the pre-scale
//! patch raises them and never lowers them.

use anyhow::{bail, Context as _};

use super::plan::Floors;

/// The production overlay's, as committed: what `docs/capacity.md`'s patch is written against.
pub const PRODUCTION: &str = include_str!("../../../deploy/k8s/overlays/production/scale.yaml");

/// The floors a `scale.yaml` sets (a strategic-merge patch of Deployments and the gateways'
/// HorizontalPodAutoscaler); what it does not name stays 0.
pub fn floors(yaml: &str) -> anyhow::Result<Floors> {
    let mut floors = Floors::default();
    for doc in yaml.split("\n---") {
        let name = field(doc, "name");
        let number = |key: &str| -> anyhow::Result<u32> {
            field(doc, key).map_or(Ok(0), |v| {
                v.parse()
                    .with_context(|| format!("{key}: {v:?} is not a count"))
            })
        };
        match (field(doc, "kind").as_deref(), name.as_deref()) {
            (Some("HorizontalPodAutoscaler"), Some("floodgate-gateway")) => {
                floors.gateways_min = number("minReplicas")?;
                floors.gateways_max = number("maxReplicas")?;
            }
            (Some("Deployment"), Some("floodgate-booking")) => floors.booking = number("replicas")?,
            (Some("Deployment"), Some("floodgate-consumer")) => {
                floors.consumers = number("replicas")?;
            }
            _ => {}
        }
    }
    if floors.gateways_max < floors.gateways_min {
        bail!("the gateways' maxReplicas is below their minReplicas");
    }
    Ok(floors)
}

/// The value of the first `key:` line of a YAML document (no nesting is needed here: each name
/// appears once in a scale patch).
fn field(doc: &str, key: &str) -> Option<String> {
    doc.lines().find_map(|line| {
        let value = line.trim_start().strip_prefix(key)?.strip_prefix(':')?;
        let value = value.split('#').next()?.trim().trim_matches('"');
        (!value.is_empty()).then(|| value.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_production_overlays_floors_are_read() {
        let f = floors(PRODUCTION).unwrap();
        assert_eq!(
            f,
            Floors {
                gateways_min: 6,
                gateways_max: 60,
                booking: 3,
                consumers: 3,
            }
        );
        assert!(floors(
            "kind: Deployment\nmetadata:\n  name: floodgate-booking\nspec:\n  replicas: lots\n"
        )
        .is_err());
        assert_eq!(floors("").unwrap(), Floors::default());
    }
}
