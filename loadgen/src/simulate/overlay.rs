//! What an overlay's `scale.yaml` already sets (`deploy/k8s/overlays/production/scale.yaml`):
//! the gateways' and the edges' autoscalers' bounds and the booking and consumer replicas, so
//! that the pre-scale patch raises them and never lowers them.

use anyhow::{bail, Context as _};

use super::plan::Floors;

/// The production overlay's, as committed: what `docs/capacity.md`'s patch is written against.
pub const PRODUCTION: &str = include_str!("../../../deploy/k8s/overlays/production/scale.yaml");

/// The floors a `scale.yaml` sets (a strategic-merge patch of Deployments and the gateways' and
/// edges' HorizontalPodAutoscalers). It must name all four: a patch written against a file that
/// left one out could lower it below what the base sets.
pub fn floors(yaml: &str) -> anyhow::Result<Floors> {
    let mut floors = Floors::default();
    let mut named = [false; 4];
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
                named[0] = true;
            }
            (Some("HorizontalPodAutoscaler"), Some("floodgate-cdn")) => {
                floors.edges_min = number("minReplicas")?;
                floors.edges_max = number("maxReplicas")?;
                named[3] = true;
            }
            (Some("Deployment"), Some("floodgate-booking")) => {
                floors.booking = number("replicas")?;
                named[1] = true;
            }
            (Some("Deployment"), Some("floodgate-consumer")) => {
                floors.consumers = number("replicas")?;
                named[2] = true;
            }
            _ => {}
        }
    }
    let objects = [
        "the HorizontalPodAutoscaler floodgate-gateway",
        "the Deployment floodgate-booking",
        "the Deployment floodgate-consumer",
        "the HorizontalPodAutoscaler floodgate-cdn",
    ];
    let missing: Vec<&str> = objects
        .iter()
        .zip(named)
        .filter(|(_, named)| !named)
        .map(|(object, _)| *object)
        .collect();
    if !missing.is_empty() {
        bail!("the scale file does not set {}", missing.join(", "));
    }
    if floors.gateways_max < floors.gateways_min || floors.edges_max < floors.edges_min {
        bail!("an autoscaler's maxReplicas is below its minReplicas");
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
                edges_min: 4,
                edges_max: 40,
                booking: 3,
                consumers: 3,
            }
        );
        assert!(floors(
            "kind: Deployment\nmetadata:\n  name: floodgate-booking\nspec:\n  replicas: lots\n"
        )
        .is_err());
        let refused = floors("").unwrap_err().to_string();
        assert!(
            refused.contains("floodgate-gateway") && refused.contains("floodgate-consumer"),
            "{refused}"
        );
    }
}
