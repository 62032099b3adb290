//! The schema and the topics: the floodgate-setup Job, and the release that runs it.

use floodgate_tests::containers::repo;
use floodgate_tests::manifests::{name, of_kind, rendered, OVERLAYS};
use serde_yaml::Value;

/// The commands of a container list, each as one line.
fn commands(containers: &Value) -> Vec<String> {
    containers
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|c| {
            let words: Vec<&str> = c["command"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            words.join(" ")
        })
        .collect()
}

/// The schema and the topics are made once per release by the floodgate-setup Job, which no Pod
/// waits for: a booking or consumer Pod added mid-sale starts without the broker's admin API (the
/// services apply missing migrations themselves). Its template cannot change, so the release in
/// docs/deploy.md deletes it first and waits for it, it deletes itself a day after it finishes,
/// and GitOps tools are told to recreate it.
#[test]
fn the_schema_and_the_topics_are_a_job_no_pod_waits_for() {
    for overlay in OVERLAYS {
        let docs = rendered(overlay);
        let jobs = of_kind(&docs, "Job");
        assert_eq!(
            jobs.iter().map(|j| name(j)).collect::<Vec<_>>(),
            ["floodgate-setup"],
            "{overlay}: the Jobs"
        );
        let job = jobs[0];
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            commands(&pod["initContainers"]),
            ["floodgate-booking migrate"],
            "{overlay}: the migrations first"
        );
        assert_eq!(
            commands(&pod["containers"]),
            ["floodgate-booking topics ensure"],
            "{overlay}: then the topics"
        );
        assert_eq!(
            pod["restartPolicy"], "Never",
            "{overlay}: each try's logs kept"
        );
        let spec = &job["spec"];
        for field in [
            "backoffLimit",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
        ] {
            assert!(
                spec[field].as_u64().is_some_and(|v| v > 0),
                "{overlay}: the Job's {field}"
            );
        }
        let annotations = &job["metadata"]["annotations"];
        assert_eq!(
            annotations["argocd.argoproj.io/sync-options"], "Replace=true,Force=true",
            "{overlay}: Argo CD recreates it"
        );
        assert_eq!(
            annotations["kustomize.toolkit.fluxcd.io/force"], "enabled",
            "{overlay}: Flux recreates it"
        );
        for d in of_kind(&docs, "Deployment") {
            assert!(
                commands(&d["spec"]["template"]["spec"]["initContainers"]).is_empty(),
                "{overlay}: {} waits for something before it starts",
                name(d)
            );
        }
    }
    let walk = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    let at = |what: &str| {
        walk.find(what)
            .unwrap_or_else(|| panic!("docs/deploy.md: no `{what}`"))
    };
    let delete = at("kubectl -n floodgate delete job floodgate-setup --ignore-not-found");
    let apply =
        at("kubectl kustomize deploy/k8s/overlays/production | kubectl -n floodgate apply -f -");
    let wait = at("kubectl -n floodgate wait --for=condition=complete job/floodgate-setup");
    assert!(
        delete < apply && apply < wait,
        "docs/deploy.md: the release deletes the last Job, applies, then waits for the new one"
    );
    // The wait outlasts the Job's own deadline: it ends with the Job's verdict, not before.
    let minutes: u64 = walk[wait..]
        .lines()
        .next()
        .and_then(|l| l.split("--timeout=").nth(1))
        .and_then(|t| t.trim().strip_suffix('m'))
        .and_then(|m| m.parse().ok())
        .expect("the wait's --timeout in minutes");
    let deadline = of_kind(&rendered("production"), "Job")[0]["spec"]["activeDeadlineSeconds"]
        .as_u64()
        .unwrap();
    assert!(
        minutes * 60 > deadline,
        "docs/deploy.md waits {minutes} min for a Job that may run {deadline} s"
    );
}
