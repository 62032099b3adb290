//! A gateway's session budget follows its container's memory limit.

use super::*;

/// A gateway takes no more sessions than its container's memory holds: under a 384 MiB limit
/// its budget is 8,192 (16 KiB a session beyond 256 MiB), below what its open files allow; with
/// no memory limit, the open files decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_session_budget_follows_its_containers_memory_limit() {
    let docker = Docker::from_env();
    let pair = docker.ok(&[
        "run",
        "--rm",
        "--network",
        "host",
        &docker.image,
        "floodgate-gateway",
        "keygen",
        "--kid",
        "t",
    ]);
    let setting = |name: &str| {
        pair.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("keygen printed no {name}"))
            .to_owned()
    };
    let (kid, key) = (
        setting("FLOODGATE_TOKEN_KEY_ID"),
        setting("FLOODGATE_TOKEN_SIGNING_KEY"),
    );
    let budget_under = |memory: Option<&str>| {
        let docker = docker.clone();
        let (kid, key) = (kid.clone(), key.clone());
        let memory = memory.map(str::to_owned);
        async move {
            let (listen, admin) = (
                floodgate_tests::gateways::free_port(),
                floodgate_tests::gateways::free_port(),
            );
            let name = unique("fgc-budget-");
            let mut args: Vec<String> = ["run", "--detach", "--name", &name, "--network", "host"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            if let Some(memory) = &memory {
                args.extend(["--memory".into(), memory.clone()]);
            }
            for (k, v) in [
                ("FLOODGATE_GATEWAY_LISTEN", listen.to_string()),
                ("FLOODGATE_GATEWAY_ADMIN_LISTEN", admin.to_string()),
                ("FLOODGATE_REDIS_URL", redis_url()),
                ("FLOODGATE_REDIS_PREFIX", format!("{name}:")),
                ("FLOODGATE_TOKEN_KEY_ID", kid),
                ("FLOODGATE_TOKEN_SIGNING_KEY", key),
            ] {
                args.extend(["--env".into(), format!("{k}={v}")]);
            }
            args.extend([
                docker.image.clone(),
                "floodgate-gateway".into(),
                "serve".into(),
            ]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            docker.ok(&args);
            let budget = eventually(
                "the gateway's metrics",
                Duration::from_secs(30),
                async || scrape(admin, "floodgate_ws_session_budget").await,
            )
            .await as u64;
            let _ = docker.run(&["rm", "--force", &name]);
            budget
        }
    };
    assert_eq!(budget_under(Some("384m")).await, 8_192);
    let unlimited = budget_under(None).await;
    assert!(
        unlimited > 8_192,
        "with no memory limit the open files decide: {unlimited}"
    );
}
