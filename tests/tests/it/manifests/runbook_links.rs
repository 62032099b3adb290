//! Where each page's link leads (issue 49): the operator's own copy of the runbook.

use floodgate_tests::containers::repo;
use floodgate_tests::manifests::{of_kind, rendered_at};

use super::uptime::copy_tree;

/// An operator's on-call reads the runbook where the operator keeps it: `prometheus-rule.sh
/// --runbook <URL>` points every alert's `runbook_url` in the PrometheusRule at `<URL>#<alert>`
/// (whatever the URL's own characters), refuses a URL it could not write as given, and
/// docs/deploy.md's table of what to change names it.
#[test]
fn the_alerts_link_the_runbook_where_the_operator_keeps_it() {
    let dir = std::env::temp_dir().join(floodgate_tests::unique("runbook-links-"));
    for part in ["deploy/k8s", "deploy/nginx", "deploy/observability"] {
        copy_tree(&repo().join(part), &dir.join(part));
    }
    std::fs::copy(repo().join("Cargo.toml"), dir.join("Cargo.toml")).unwrap();
    let script = dir.join("deploy/observability/prometheus-rule.sh");
    let url = "https://wiki.example.com/ops/floodgate-runbook.md?view=1&raw=0";
    let run = |args: &[&str]| {
        std::process::Command::new("bash")
            .arg(&script)
            .args(args)
            .output()
            .unwrap()
    };
    let wrote = run(&["--runbook", url]);
    assert!(wrote.status.success(), "{wrote:?}");
    let docs = rendered_at(&dir.join("deploy/k8s/overlays/production"));
    let rules: Vec<_> = of_kind(&docs, "PrometheusRule")[0]["spec"]["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().iter())
        .cloned()
        .collect();
    assert!(rules.len() > 10, "{rules:?}");
    for rule in &rules {
        let alert = rule["alert"].as_str().unwrap();
        assert_eq!(
            rule["annotations"]["runbook_url"].as_str(),
            Some(format!("{url}#{}", alert.to_lowercase()).as_str()),
            "{alert}"
        );
    }
    for refused in [
        "not a url",
        "https://wiki.example.com/a#b",
        "https://x/\"y",
        "https://x/a\\b",
        "https://x/{{ $labels.job }}",
    ] {
        let said = run(&["--runbook", refused]);
        assert_eq!(said.status.code(), Some(2), "{refused}: {said:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let deploy = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    assert!(
        deploy.contains("deploy/observability/prometheus-rule.sh --runbook <URL>"),
        "docs/deploy.md's table names the runbook links"
    );
}
