//! The crates' own graph: which crate may depend on what, checked on the real dependency tree
//! (`cargo tree`, resolved from `Cargo.lock` exactly as a build resolves it), and no import circle
//! between a crate's modules ([`imports`] reads the graph from the source).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

mod circles;
mod imports;

use circles::circles;
use imports::{import_graph, production_code, reexports, references, ModulePath};

/// The packages `package` links in a normal build (no dev or build dependencies), itself
/// included.
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["tree", "--locked", "--offline", "--edges", "normal"])
        .args(["--prefix", "none", "--format", "{p}", "--package", package])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// What a service links and a client never should: the Kafka, PostgreSQL and Redis clients and
/// the HTTP server.
const SERVICE_RUNTIME: [&str; 6] = [
    "rdkafka",
    "rdkafka-sys",
    "sqlx",
    "redis",
    "axum",
    "floodgate-platform",
];

/// `floodgate-client` is what an outside client builds on: it must not drag librdkafka, sqlx,
/// a Redis client or an HTTP server into someone else's build.
#[test]
fn the_client_links_none_of_the_services_runtime() {
    let linked = normal_dependencies("floodgate-client");
    assert!(
        linked.contains("floodgate-protocol"),
        "the client builds on the wire crate: {linked:?}"
    );
    let wrong: Vec<_> = SERVICE_RUNTIME
        .iter()
        .filter(|name| linked.contains(**name))
        .collect();
    assert!(wrong.is_empty(), "floodgate-client links {wrong:?}");
}

/// `floodgate-protocol` is types and the checks a client can make itself: no executor, no
/// network client, no server.
#[test]
fn the_wire_crate_has_no_runtime_at_all() {
    let linked = normal_dependencies("floodgate-protocol");
    let runtime = ["tokio", "reqwest", "hyper", "tokio-tungstenite"];
    let wrong: Vec<_> = SERVICE_RUNTIME
        .iter()
        .chain(runtime.iter())
        .filter(|name| linked.contains(**name))
        .collect();
    assert!(wrong.is_empty(), "floodgate-protocol links {wrong:?}");
}

/// The stand-ins (the sandbox provider, the sign-in stand-in) are tools for a demo and the tests:
/// no service links them, and the booking binary has no command that runs them.
#[test]
fn no_service_carries_the_stand_ins() {
    for service in [
        "floodgate-booking",
        "floodgate-gateway",
        "floodgate-consumer",
    ] {
        let linked = normal_dependencies(service);
        assert!(
            !linked.contains("floodgate-sandbox"),
            "{service} links the sandbox"
        );
    }
    // An operator's script that still asks the booking binary for it is told where it went.
    let out = Command::new(floodgate_tests::binary("floodgate-booking"))
        .args(["sandbox-pay", "--signin"])
        .env("FLOODGATE_SANDBOX_LISTEN", "127.0.0.1:0")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("run `floodgate-sandbox`"),
        "floodgate-booking sandbox-pay: {:?} {said}",
        out.status
    );
    let sandbox = Command::new(floodgate_tests::binary("floodgate-sandbox"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&sandbox.stdout);
    assert!(
        sandbox.status.success() && help.contains("--signin"),
        "{help}"
    );
}

/// The crates whose modules must not import each other in a circle.
const CRATES: [&str; 8] = [
    "protocol", "platform", "client", "sandbox", "gateway", "booking", "consumer", "loadgen",
];

/// No two modules of a crate import each other, directly or through others: a circle means
/// neither can be read, tested or moved without the other, and it is how a crate's rooms
/// dissolve into one.
#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let mut wrong = Vec::new();
    for krate in CRATES {
        for circle in circles(&import_graph(krate)) {
            let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            wrong.push(format!("{krate}: {}", names.join(" <-> ")));
        }
    }
    assert!(wrong.is_empty(), "import circles:\n{}", wrong.join("\n"));
}

/// The graph is built from what the code says: a planted arrow back closes a circle.
#[test]
fn the_circle_check_finds_a_planted_circle() {
    let modules: BTreeSet<ModulePath> = [vec![], vec!["a".into()], vec!["b".into()]].into();
    let names = |found: BTreeSet<(ModulePath, Option<String>)>| -> BTreeSet<ModulePath> {
        found.into_iter().map(|(module, _)| module).collect()
    };
    let code = "use crate::b::{Thing, other::X};\n";
    let a = names(references(&vec!["a".into()], code, &modules));
    let code = "fn f() { super::a::g(); }\n";
    let b = names(references(&vec!["b".into()], code, &modules));
    assert_eq!(a, [vec!["b".to_owned()]].into());
    assert_eq!(b, [vec!["a".to_owned()]].into());
    let graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> =
        [(vec!["a".into()], a), (vec!["b".into()], b)].into();
    assert_eq!(circles(&graph).len(), 1);
    let test_only = production_code("#[cfg(test)]\nmod tests {\n    use crate::a::X;\n}\n");
    assert!(!test_only.contains("crate::a"), "{test_only}");
    // A brace or a `//` inside a literal is text: the production code after the test item stays.
    let tricky = production_code(
        "#[cfg(test)]\nfn t() { let _ = \"{{\"; let _ = '{'; }\nuse crate::b::Y; // x\nconst U: &str = \"http://x\"; use crate::a::Z;\n",
    );
    assert!(
        tricky.contains("use crate::b::Y;") && tricky.contains("use crate::a::Z;"),
        "{tricky}"
    );
    // An item re-exported by a parent is followed to the module that defines it.
    let parent: BTreeSet<ModulePath> =
        [vec![], vec!["p".into()], vec!["p".into(), "q".into()]].into();
    let exported = reexports(&vec!["p".into()], "pub use q::Item;\n", &parent);
    assert_eq!(
        exported.get("Item"),
        Some(&vec!["p".to_owned(), "q".to_owned()])
    );
}
