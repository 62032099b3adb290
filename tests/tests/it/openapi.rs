//! The OpenAPI documents (issue 17): made from the handlers, committed in `docs/openapi/`,
//! served at `/openapi.json`, valid OpenAPI 3.1 by `openapi-spec-validator`, and true of the
//! running services by `schemathesis`, which fuzzes the live booking and ops APIs with hooks
//! (tests/fuzz/floodgate_hooks.py) that give it real tokens, secrets and signatures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use floodgate_tests::client::RoomClient;
use floodgate_tests::services::{booking_serve, start_service, Stopped};
use floodgate_tests::{eventually, fresh_database, secret, tool, unique, SaleSpec, TestApp};

/// Every document: its file under docs/openapi/ and what the code makes now.
fn documents() -> Vec<(&'static str, utoipa::openapi::OpenApi)> {
    vec![
        ("booking", floodgate_booking::router::public_document()),
        ("ops", floodgate_booking::router::ops_document()),
        ("gateway", floodgate_gateway::router::document()),
    ]
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn committed(name: &str) -> PathBuf {
    repository().join(format!("docs/openapi/{name}.json"))
}

fn pretty(document: &utoipa::openapi::OpenApi) -> String {
    document.to_pretty_json().unwrap() + "\n"
}

/// The committed documents are exactly what the code makes; `FLOODGATE_WRITE_OPENAPI=1` writes
/// them (after a change to a handler or a body, run this test with it and commit the result).
#[test]
fn the_committed_documents_are_what_the_code_makes() {
    let write = std::env::var("FLOODGATE_WRITE_OPENAPI").is_ok_and(|v| v == "1");
    for (name, document) in documents() {
        let made = pretty(&document);
        let path = committed(name);
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &made).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == made,
            "{} is not what the code makes: refresh it with FLOODGATE_WRITE_OPENAPI=1 cargo \
             nextest run -E 'test(the_committed_documents_are_what_the_code_makes)'",
            path.display()
        );
    }
}

/// `openapi-spec-validator` on a file: whether it passed, and what it said.
fn validate(path: &Path) -> (bool, String) {
    let out = Command::new(tool("venv/bin/openapi-spec-validator"))
        .arg(path)
        .output()
        .expect("openapi-spec-validator runs (deploy/stack.sh tools installs it)");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

#[test]
fn every_document_is_valid_openapi_3_1() {
    for (name, document) in documents() {
        let value = serde_json::to_value(&document).unwrap();
        assert_eq!(value["openapi"], "3.1.0", "{name}");
        let (ok, said) = validate(&committed(name));
        assert!(ok, "{name}: {said}");
    }
    // The validator does fail a broken document: a response naming a schema that is not there.
    let mut broken = serde_json::to_value(documents().remove(0).1).unwrap();
    broken["components"]["schemas"]
        .as_object_mut()
        .unwrap()
        .remove("ErrorBody");
    let path = std::env::temp_dir().join(unique("floodgate-broken-openapi-") + ".json");
    std::fs::write(&path, broken.to_string()).unwrap();
    let (ok, said) = validate(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(!ok, "a dangling $ref passed: {said}");
}

/// Every operation in `document`: (method, path) and the statuses it documents.
fn operations(document: &serde_json::Value) -> BTreeMap<(String, String), BTreeSet<u16>> {
    let mut all = BTreeMap::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let documented = operation["responses"]
                .as_object()
                .unwrap()
                .keys()
                .map(|status| status.parse().unwrap())
                .collect();
            all.insert((method.to_uppercase(), path.clone()), documented);
        }
    }
    all
}

/// Runs schemathesis on the document served at `base`/openapi.json with the hooks; returns its
/// exit status and output.
fn schemathesis(base: &str, env: &[(&str, String)], report: &Path) -> (bool, String) {
    let out = Command::new(tool("venv/bin/schemathesis"))
        .args(["run", &format!("{base}/openapi.json"), "--url", base])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_schema_conformance,response_headers_conformance,negative_data_rejection,\
             missing_required_header,unsupported_method",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "40",
            "--seed",
            "17",
            "--workers",
            "1",
            "--request-timeout",
            "10",
            "--report",
            "junit",
            "--report-junit-path",
        ])
        .arg(report)
        // Its cache of past crashes goes in the run's own folder: each run starts clean.
        .current_dir(report.parent().unwrap())
        .env("SCHEMATHESIS_HOOKS", "floodgate_hooks")
        .env("PYTHONPATH", repository().join("tests/fuzz"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("schemathesis runs (deploy/stack.sh tools installs it)");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

/// The live booking, ops and gateway APIs, fuzzed by schemathesis from their own served
/// documents: no 5xx, every response and status as documented, invalid input refused, and every
/// operation answered at least once with a 2xx and once with a documented 4xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_in_the_live_apis() {
    let (url, db) = fresh_database().await;
    let app = TestApp::spawn(db).await;
    let (sale, pool) = (unique("fuzz-"), "floor".to_owned());
    let spec = SaleSpec {
        pools: vec![(pool.clone(), 100_000)],
        opens_in: std::time::Duration::from_millis(1500),
        max_seats: 4,
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    // One buyer joins before the opening, so the lottery has a draw with a ticket to prove.
    let early = RoomClient::join(&app.ws_url(&sale))
        .await
        .expect("a pre-queue ticket");
    let draw = format!("http://{}/v1/sales/{sale}/draw", app.gateway);
    eventually("the draw", std::time::Duration::from_secs(20), async || {
        let (_, record) = app.answer(app.http.get(&draw)).await;
        record["status"] == "drawn"
    })
    .await;
    let (ops_token, webhook_secret) = (secret("ops_"), secret("whsec_"));
    let sandbox = format!("http://{}", app.sandbox);
    let service_env = [
        ("FLOODGATE_PAYMENT_PROVIDER_URL", sandbox.clone()),
        (
            "FLOODGATE_PAYMENT_API_KEY",
            app.payment_api_key().to_owned(),
        ),
        ("FLOODGATE_OPS_TOKEN", format!("fuzzer:{ops_token}")),
        ("FLOODGATE_WEBHOOK_SECRET", webhook_secret.clone()),
        ("FLOODGATE_IDENTITY_ISSUER", sandbox.clone()),
        (
            "FLOODGATE_IDENTITY_AUDIENCE",
            floodgate_tests::IDENTITY_AUDIENCE.to_owned(),
        ),
        (
            "FLOODGATE_IDENTITY_JWKS_URL",
            format!("{sandbox}/.well-known/jwks.json"),
        ),
    ];
    let (mut command, admin, api) = booking_serve(&app, &url, &service_env);
    let _booking = Stopped(start_service(&mut command, &admin).await);

    // The served documents are the committed ones.
    let gateway = format!("http://{}", app.gateway);
    for (base, name) in [(&api, "booking"), (&admin, "ops"), (&gateway, "gateway")] {
        let served: serde_json::Value = app
            .http
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let on_disk: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(committed(name)).unwrap()).unwrap();
        assert_eq!(served, on_disk, "{base}/openapi.json");
    }

    let dir = std::env::temp_dir().join(unique("floodgate-fuzz-"));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens: Vec<String> = (1..=400)
        .map(|ticket| app.token(&sale, ticket, spec.max_seats, 600_000))
        .collect();
    std::fs::write(dir.join("tokens"), tokens.join("\n")).unwrap();
    let log = dir.join("calls.jsonl");
    let hooks_env = [
        ("FLOODGATE_FUZZ_BOOKING", api.clone()),
        ("FLOODGATE_FUZZ_SALE", sale.clone()),
        ("FLOODGATE_FUZZ_POOL", pool.clone()),
        (
            "FLOODGATE_FUZZ_TOKENS",
            dir.join("tokens").display().to_string(),
        ),
        ("FLOODGATE_FUZZ_IDENTITY", app.identity("fuzz-buyer").await),
        ("FLOODGATE_FUZZ_OPS_TOKEN", ops_token),
        ("FLOODGATE_FUZZ_WEBHOOK_SECRET", webhook_secret),
        ("FLOODGATE_FUZZ_LOG", log.display().to_string()),
        // The buyer's pre-queue ticket, which the draw placed.
        ("FLOODGATE_FUZZ_TICKET", "1".to_owned()),
        ("FLOODGATE_FUZZ_RESUME", early.resume_token.clone()),
    ];
    // Blocking: schemathesis is a child process; the services run in their own processes.
    let runs = tokio::task::spawn_blocking({
        let (api, admin, report) = (api.clone(), admin.clone(), dir.clone());
        move || {
            [(api, "booking"), (admin, "ops"), (gateway, "gateway")].map(
                |(base, name): (String, &str)| {
                    let (ok, said) = schemathesis(&base, &hooks_env, &report.join(name));
                    (name, ok, said)
                },
            )
        }
    })
    .await
    .unwrap();
    for (name, ok, said) in &runs {
        assert!(ok, "schemathesis found failures in the {name} API:\n{said}");
    }

    // Every operation met at least one 2xx and one 4xx.
    let mut seen: BTreeMap<(String, String), BTreeSet<u16>> = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let call: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = (
            call["method"].as_str().unwrap().to_owned(),
            call["path"].as_str().unwrap().to_owned(),
        );
        let status = u16::try_from(call["status"].as_u64().unwrap()).unwrap();
        seen.entry(key).or_default().insert(status);
    }
    for (name, document) in documents() {
        for (operation, documented) in operations(&serde_json::to_value(&document).unwrap()) {
            let statuses = seen.get(&operation).cloned().unwrap_or_default();
            if operation.1 == "/healthz" || operation.1 == "/readyz" {
                // A probe has no input to refuse; it must have answered 200.
                assert!(
                    statuses.contains(&200),
                    "{name} {operation:?}: {statuses:?}"
                );
                continue;
            }
            if operation.1 == "/ws" {
                // Its success is the upgrade, which an HTTP fuzzer does not make: the session is
                // tested live against docs/asyncapi.yaml. Here it must refuse as documented.
                assert!(
                    statuses.iter().any(|s| documented.contains(s)),
                    "{statuses:?}"
                );
                continue;
            }
            let refused = statuses
                .iter()
                .any(|s| (400..500).contains(s) && documented.contains(s));
            assert!(
                statuses.iter().any(|s| (200..300).contains(s)) && refused,
                "{name} {operation:?} was not answered with both a 2xx and a documented 4xx: \
                 {statuses:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A query parameter an operation does not document is refused before any work (a stranger's
/// made-up parameter would otherwise be a CDN cache key of its own, straight to the origin);
/// the documented ones still work, on the gateway and the booking service alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undocumented_query_parameter_is_refused() {
    let app = TestApp::spawn(floodgate_tests::fresh_db().await).await;
    let sale = unique("strict-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let gateway = format!("http://{}", app.gateway);
    let booking = format!("http://{}", app.booking);
    for url in [
        format!("{gateway}/v1/sales/{sale}?cachebuster=1"),
        format!("{gateway}/v1/sales/{sale}/draw/nonces?from=1&count=5&x=y"),
        format!("{gateway}/v1/sales/{sale}/seats.json?v=2"),
        format!("{booking}/v1/sales/{sale}/reservations/p1~0?debug"),
    ] {
        let (status, body) = app.answer(app.http.get(&url)).await;
        assert_eq!(status, 400, "{url}: {body}");
        assert_eq!(body["error"], "unknown_parameter", "{url}: {body}");
    }
    for url in [
        format!("{gateway}/v1/sales/{sale}"),
        format!("{gateway}/v1/sales/{sale}/draw/nonces?from=1&count=5"),
    ] {
        let (status, body) = app.answer(app.http.get(&url)).await;
        assert_eq!(status, 200, "{url}: {body}");
    }
}
