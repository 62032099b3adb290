//! The Kubernetes manifests as a cluster would receive them: an overlay rendered by the
//! `kubectl kustomize` this project installs (deploy/stack.sh tools), parsed.

use std::process::Command;

use crate::containers::repo;

/// Every resource of overlay `overlay` (`local`, `production`), rendered.
pub fn rendered(overlay: &str) -> Vec<serde_yaml::Value> {
    rendered_at(&repo().join("deploy/k8s/overlays").join(overlay))
}

/// The resources the kustomization in `dir` renders to, as [`rendered`].
pub fn rendered_at(dir: &std::path::Path) -> Vec<serde_yaml::Value> {
    let output = Command::new(crate::tool("kubernetes-client/usr/bin/kubectl"))
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl (deploy/stack.sh tools installs it)");
    assert!(
        output.status.success(),
        "{} renders: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("a rendered resource parses"))
        .filter(|doc: &serde_yaml::Value| !doc.is_null())
        .collect()
}

/// The overlays the repository ships.
pub const OVERLAYS: [&str; 2] = ["local", "production"];

/// The resources of `kind` among `docs`.
pub fn of_kind<'a>(docs: &'a [serde_yaml::Value], kind: &str) -> Vec<&'a serde_yaml::Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The resources that run Pods: the Deployments, and the Jobs (the setup's).
pub fn workloads(docs: &[serde_yaml::Value]) -> Vec<&serde_yaml::Value> {
    docs.iter()
        .filter(|d| d["kind"] == "Deployment" || d["kind"] == "Job")
        .collect()
}

/// A resource's name.
pub fn name(doc: &serde_yaml::Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

/// A container's settings: the ConfigMaps it takes whole (`envFrom`), then its own `env`.
pub fn settings(
    docs: &[serde_yaml::Value],
    c: &serde_yaml::Value,
) -> std::collections::BTreeMap<String, String> {
    let mut env = std::collections::BTreeMap::new();
    for from in c["envFrom"].as_sequence().into_iter().flatten() {
        let map = from["configMapRef"]["name"].as_str().unwrap();
        let config = of_kind(docs, "ConfigMap")
            .into_iter()
            .find(|d| name(d) == map)
            .unwrap_or_else(|| panic!("no ConfigMap {map}"));
        for (k, v) in config["data"].as_mapping().into_iter().flatten() {
            env.insert(
                k.as_str().unwrap().to_owned(),
                v.as_str().unwrap().to_owned(),
            );
        }
    }
    for e in c["env"].as_sequence().into_iter().flatten() {
        let value = e["value"].as_str().unwrap_or("(from the cluster)");
        env.insert(e["name"].as_str().unwrap().to_owned(), value.to_owned());
    }
    env
}
