//! The sale simulator as an operator runs it: `floodgate-loadgen simulate` on a sale file prints
//! the plan and writes the pre-scale patch, and the patch applies to the production overlay as
//! the runbook says (`kubectl kustomize`, from `deploy/stack.sh tools`), raising the gateways'
//! autoscaler's floor and the booking and consumer replicas to the plan's, never below the
//! overlay's own.

use std::path::{Path, PathBuf};
use std::process::Command;

use floodgate_tests::{binary, tool, unique};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The field `key: value` under the object of `kind` named `name` in a rendered overlay.
fn field(rendered: &str, kind: &str, name: &str, key: &str) -> Option<u64> {
    rendered.split("\n---\n").find_map(|doc| {
        let ours =
            doc.contains(&format!("kind: {kind}\n")) && doc.contains(&format!("  name: {name}\n"));
        ours.then(|| {
            doc.lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{key}: "))?.parse().ok())
        })?
    })
}

#[test]
fn the_plans_patch_pre_scales_the_production_overlay() {
    let dir = std::env::temp_dir().join(unique("prescale-"));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(binary("floodgate-loadgen"))
        .args(["simulate", "--sale"])
        .arg(repo().join("deploy/sales/rush.toml"))
        // Small instances: the plan needs more booking instances than the overlay's three.
        .args([
            "--crowd",
            "1500000",
            "--connections-per-gateway",
            "50000",
            "--cores",
            "0.1",
        ])
        .arg("--patch")
        .arg(dir.join("prescale.yaml"))
        .arg("--json")
        .arg(dir.join("plan.json"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("gateways") && said.contains("admission rate"),
        "{said}"
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    let gateways = plan["gateways"].as_u64().unwrap();
    // 1.5 million connections at 50,000 a gateway at least.
    assert!(gateways >= 30, "{plan}");
    // An overlay of its own on top of production's, as an operator would add one for the sale
    // (in a copy of the deployment files: the manifests take the edge's from deploy/nginx).
    std::fs::create_dir_all(dir.join("deploy")).unwrap();
    for part in ["deploy/k8s", "deploy/nginx"] {
        let status = Command::new("cp")
            .arg("-R")
            .arg(repo().join(part))
            .arg(dir.join("deploy"))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let sale_overlay = dir.join("deploy/k8s/overlays/sale");
    std::fs::create_dir_all(&sale_overlay).unwrap();
    std::fs::rename(
        dir.join("prescale.yaml"),
        sale_overlay.join("prescale.yaml"),
    )
    .unwrap();
    std::fs::write(
        sale_overlay.join("kustomization.yaml"),
        "bases:\n- ../production\npatchesStrategicMerge:\n- prescale.yaml\n",
    )
    .unwrap();
    let rendered = Command::new(tool("kubernetes-client/usr/bin/kubectl"))
        .arg("kustomize")
        .arg(&sale_overlay)
        .output()
        .expect("kubectl (deploy/stack.sh tools installs it)");
    let text = String::from_utf8_lossy(&rendered.stdout);
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    // Raised to the plan, never below what the production overlay sets (6 to 60 gateways, 4 to
    // 40 edges, 3 booking and 3 consumer instances).
    let hpa = |key| field(&text, "HorizontalPodAutoscaler", "floodgate-gateway", key);
    assert_eq!(hpa("minReplicas"), Some(gateways), "{text}");
    assert_eq!(hpa("maxReplicas"), Some((gateways * 2).max(60)));
    // The edge too, one for each 100,000 people: 15 (the overlay's floor is 4 to 40).
    let edges = plan["edges"].as_u64().unwrap();
    assert_eq!(edges, 15, "{plan}");
    let edge = |key| field(&text, "HorizontalPodAutoscaler", "floodgate-cdn", key);
    assert_eq!(edge("minReplicas"), Some(edges), "{text}");
    assert_eq!(edge("maxReplicas"), Some((edges * 2).max(40)));
    for (name, key) in [
        ("floodgate-booking", "booking"),
        ("floodgate-consumer", "consumers"),
    ] {
        let wanted = plan[key].as_u64().unwrap().max(3);
        assert_eq!(
            field(&text, "Deployment", name, "replicas"),
            Some(wanted),
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A sale file the booking service would refuse is refused here too, with the reason.
#[test]
fn a_bad_sale_file_is_refused_with_its_reason() {
    let dir = std::env::temp_dir().join(unique("badsale-"));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(repo().join("deploy/sales/rush.toml"))
        .unwrap()
        .replace("hold_ttl_secs = 300", "hold_ttl_secs = 0");
    std::fs::write(dir.join("sale.toml"), text).unwrap();
    let out = Command::new(binary("floodgate-loadgen"))
        .args(["simulate", "--sale"])
        .arg(dir.join("sale.toml"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("hold_ttl_secs must be positive"), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}

/// What a stranger or a slip of the keyboard gives the command line gets a clear refusal, never a
/// plan built on nonsense.
#[test]
fn nonsense_on_the_command_line_is_refused_with_a_reason() {
    let sale = repo().join("deploy/sales/rush.toml");
    for (args, reason) in [
        (&["--cores", "0"][..], "--cores"),
        (&["--cores", "NaN"][..], "--cores"),
        (&["--crowd", "0"][..], "--crowd"),
        (
            &["--connections-per-gateway", "0"][..],
            "--connections-per-gateway",
        ),
        (&["--clients-per-edge", "0"][..], "--clients-per-edge"),
        (&["--autopilot", "5"][..], "FLOOR,CEILING"),
        (&["--autopilot", "50,5"][..], "FLOOR <= CEILING"),
        (&["--autopilot", "1,inf"][..], "admission_rate"),
        (&["--calibrate", "/nonexistent-run"][..], "nonexistent-run"),
        (&["--prequeue", "2"][..], "--prequeue"),
        (&["--patience-secs=-5"][..], "--patience-secs"),
    ] {
        let out = Command::new(binary("floodgate-loadgen"))
            .args(["simulate", "--sale"])
            .arg(&sale)
            .args(args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was taken");
        assert!(said.contains(reason), "{args:?}: {said}");
    }
}

/// The crowd's shape is the operator's to set: a crowd that never gives up leaves nobody behind,
/// where the standard one (ten minutes' patience on average) loses people while the line is long.
#[test]
fn the_crowds_patience_is_a_flag() {
    let dir = std::env::temp_dir().join(unique("patience-"));
    std::fs::create_dir_all(&dir).unwrap();
    let left = |extra: &[&str]| {
        let json = dir.join("plan.json");
        let out = Command::new(binary("floodgate-loadgen"))
            .args(["simulate", "--sale"])
            .arg(repo().join("deploy/sales/rush.toml"))
            .args(["--crowd", "200000", "--json"])
            .arg(&json)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        plan["outcome"]["left_the_line"].as_u64().unwrap()
    };
    assert!(left(&[]) > 1_000);
    assert_eq!(left(&["--patience-secs", "0"]), 0);
    std::fs::remove_dir_all(&dir).ok();
}
