//! `deploy/compose.yaml` read as Compose reads it: each service with its anchors and merge
//! keys resolved, and the sizes it writes.

use std::collections::BTreeMap;

use super::repo;

/// One service of `deploy/compose.yaml`, with its anchors and merge keys resolved.
#[derive(Clone, Debug, Default)]
pub struct Service {
    pub image: String,
    pub command: Vec<String>,
    pub environment: BTreeMap<String, String>,
    pub secrets: Vec<String>,
    pub env_file: Option<String>,
    pub replicas: u32,
    pub read_only: bool,
    pub tmpfs: Vec<String>,
    pub ulimit_nofile: Option<u64>,
    pub cap_drop: Vec<String>,
    pub security_opt: Vec<String>,
    /// Its fixed address on compose's network, if it has one.
    pub ipv4_address: Option<String>,
    /// Its memory limit (`mem_limit`), in bytes.
    pub mem_limit: Option<u64>,
    /// Its mounts of compose's named volumes: (volume, path in the container, read-only).
    pub volumes: Vec<(String, String, bool)>,
}

/// `deploy/compose.yaml`, read.
pub struct Compose {
    services: serde_yaml::Mapping,
}

impl Compose {
    pub fn load() -> Compose {
        Self::parse(&std::fs::read_to_string(repo().join("deploy/compose.yaml")).unwrap())
    }

    pub fn parse(text: &str) -> Compose {
        let mut doc: serde_yaml::Value = serde_yaml::from_str(text).expect("compose.yaml parses");
        doc.apply_merge()
            .expect("compose.yaml's merge keys resolve");
        // `<<:` inside a nested mapping (environment) is resolved by a second pass.
        doc.apply_merge().unwrap();
        let services = doc["services"]
            .as_mapping()
            .expect("compose.yaml has services")
            .clone();
        Compose { services }
    }

    pub fn names(&self) -> Vec<String> {
        self.services
            .keys()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect()
    }

    pub fn service(&self, name: &str) -> Service {
        let s = self
            .services
            .get(name)
            .unwrap_or_else(|| panic!("compose.yaml has no service {name}"));
        let text = |v: &serde_yaml::Value| match v {
            serde_yaml::Value::String(s) => s.clone(),
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::Bool(b) => b.to_string(),
            other => panic!("{name}: unexpected value {other:?}"),
        };
        let list = |v: &serde_yaml::Value| -> Vec<String> {
            v.as_sequence()
                .map(|items| items.iter().map(text).collect())
                .unwrap_or_default()
        };
        let environment = s["environment"]
            .as_mapping()
            .map(|env| {
                env.iter()
                    .filter(|(k, _)| k.as_str() != Some("<<"))
                    .map(|(k, v)| (text(k), text(v)))
                    .collect()
            })
            .unwrap_or_default();
        Service {
            image: s["image"].as_str().unwrap_or_default().to_owned(),
            command: list(&s["command"]),
            environment,
            secrets: list(&s["secrets"]),
            env_file: s["env_file"].as_str().map(str::to_owned),
            replicas: s["deploy"]["replicas"].as_u64().unwrap_or(1) as u32,
            read_only: s["read_only"].as_bool().unwrap_or(false),
            tmpfs: list(&s["tmpfs"]),
            ulimit_nofile: s["ulimits"]["nofile"]["hard"].as_u64(),
            cap_drop: list(&s["cap_drop"]),
            security_opt: list(&s["security_opt"]),
            ipv4_address: s["networks"]["default"]["ipv4_address"]
                .as_str()
                .map(str::to_owned),
            mem_limit: s["mem_limit"].as_str().map(|m| {
                bytes(m).unwrap_or_else(|| panic!("{name}: mem_limit {m:?} is not a size"))
            }),
            volumes: list(&s["volumes"])
                .iter()
                .map(|mount| {
                    let parts: Vec<&str> = mount.split(':').collect();
                    match parts[..] {
                        [volume, path] => (volume.to_owned(), path.to_owned(), false),
                        [volume, path, "ro"] => (volume.to_owned(), path.to_owned(), true),
                        _ => panic!("{name}: volume {mount:?} is not <volume>:<path>[:ro]"),
                    }
                })
                .collect(),
        }
    }
}

/// A size as compose (`4g`, `512m`) or Kubernetes (`4Gi`, `512Mi`) writes it, in bytes.
pub fn bytes(size: &str) -> Option<u64> {
    let size = size.trim();
    let digits = size
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(size.len());
    let number: u64 = size[..digits].parse().ok()?;
    let unit = match size[digits..].trim_end_matches(['i', 'b', 'B']) {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return None,
    };
    Some(number * unit)
}
