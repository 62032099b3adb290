//! The crates' own graph: which crate may depend on what, checked on the real dependency tree
//! (`cargo tree`, resolved from `Cargo.lock` exactly as a build resolves it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let out = Command::new(floodgate_tests::binary("floodgate-booking"))
        .args(["sandbox-pay", "--help"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "floodgate-booking still runs the sandbox: {}",
        String::from_utf8_lossy(&out.stdout)
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

/// A module's path inside its crate: `room/driver.rs` is `["room", "driver"]`, `room/mod.rs` is
/// `["room"]`, the crate root is `[]`.
type ModulePath = Vec<String>;

fn module_of(relative: &Path) -> ModulePath {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    let root = parts.is_empty() && matches!(stem, "lib" | "main");
    if stem != "mod" && !root {
        parts.push(stem.to_owned());
    }
    parts
}

/// Every `.rs` file under `dir`, with its path relative to `root`.
fn rust_files(root: &Path, dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(root, &path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path.strip_prefix(root).unwrap().to_owned());
        }
    }
}

/// `source` without comments and without the items under `#[cfg(test)]` (a test module may
/// reach anywhere; the production graph is what must have no circle).
fn production_code(source: &str) -> String {
    let mut code = String::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            // Skip the item: up to its closing brace, or its `;` when it has no body.
            let mut depth = 0i32;
            for item in lines.by_ref() {
                let item = item.split("//").next().unwrap();
                depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
                if depth == 0 && (item.contains('}') || item.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        code.push_str(line.split("//").next().unwrap());
        code.push('\n');
    }
    code
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a use tree starting at `text` (`a::b::{c, d::e}` gives `a::b::c`, `a::b::d::e`),
/// each as its segments; an expression's path (`a::b::f(x)`) ends where the path does.
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut at = 0;
    let mut prefix = Vec::new();
    loop {
        let rest = &text[at..];
        let skipped = rest.len() - rest.trim_start().len();
        at += skipped;
        let rest = &text[at..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut paths = Vec::new();
            let mut inner = at + 1;
            let mut tail = group;
            loop {
                let trimmed = tail.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                inner += tail.len() - trimmed.len();
                if trimmed.starts_with('}') || trimmed.is_empty() {
                    break;
                }
                let (sub, used) = use_tree(trimmed);
                paths.extend(sub.into_iter().map(|p| [prefix.clone(), p].concat()));
                inner += used.max(1);
                tail = &text[inner..];
            }
            return (paths, inner + 1);
        }
        let len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if len == 0 {
            return (vec![prefix], at);
        }
        prefix.push(rest[..len].to_owned());
        at += len;
        match text[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => return (vec![prefix], at),
        }
    }
}

/// The modules `module`'s code refers to: every `crate::`, `self::` and `super::` path, and a
/// `use` of a child module by its bare name, resolved to the deepest module it names.
fn references(
    module: &ModulePath,
    code: &str,
    modules: &BTreeSet<ModulePath>,
) -> BTreeSet<ModulePath> {
    let mut found = BTreeSet::new();
    let mut resolve = |base: ModulePath, path: &[String]| {
        let mut target = base;
        for segment in path {
            let mut deeper = target.clone();
            deeper.push(segment.clone());
            if !modules.contains(&deeper) {
                break;
            }
            target = deeper;
        }
        found.insert(target);
    };
    for (at, _) in code.match_indices("::") {
        // Only where a path starts: `crate::`, `self::`, `super::` not preceded by `::` or an
        // identifier.
        let head_start = code[..at]
            .rfind(|c: char| !is_ident(c))
            .map_or(0, |i| i + 1);
        let head = &code[head_start..at];
        let before = code[..head_start].trim_end();
        if !matches!(head, "crate" | "self" | "super") || before.ends_with("::") {
            continue;
        }
        let (paths, _) = use_tree(&code[head_start..]);
        for path in paths {
            let supers = path.iter().take_while(|s| *s == "super").count();
            let (base, rest) = match path[0].as_str() {
                "crate" => (Vec::new(), &path[1..]),
                "self" => (module.clone(), &path[1..]),
                _ => (
                    module[..module.len().saturating_sub(supers)].to_vec(),
                    &path[supers..],
                ),
            };
            resolve(base, rest);
        }
    }
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let code_line = line.trim_start();
        let code_line = code_line
            .strip_prefix("pub(crate) ")
            .or_else(|| code_line.strip_prefix("pub "))
            .unwrap_or(code_line);
        let Some(tree) = code_line.strip_prefix("use ") else {
            continue;
        };
        let child = tree.split(|c: char| !is_ident(c)).next().unwrap_or("");
        let mut path = module.clone();
        path.push(child.to_owned());
        if modules.contains(&path) {
            let tree_at = start + (line.len() - tree.len());
            for path in use_tree(&code[tree_at..]).0 {
                resolve(module.clone(), &path);
            }
        }
    }
    found
}

/// The import graph of a crate's modules, lifted to siblings: when anything under `a` refers to
/// anything under `b`, the arrow is drawn between the two children of their nearest common
/// parent (`room::driver` using `room::controller` is an arrow between those two; `signin::flow`
/// using `sandbox` is an arrow from `signin` to `sandbox`). A module and its own descendants are
/// one unit: a parent using its children and a child its parent's items is no circle.
fn import_graph(crate_dir: &str) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    let modules: BTreeSet<ModulePath> = files.iter().map(|f| module_of(f)).collect();
    let mut graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for file in &files {
        let from = module_of(file);
        let code = production_code(&std::fs::read_to_string(root.join(file)).unwrap());
        for to in references(&from, &code, &modules) {
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                graph
                    .entry(from[..=common].to_vec())
                    .or_default()
                    .insert(to[..=common].to_vec());
            }
        }
    }
    graph
}

/// The graph's strongly connected components of more than one module: its circles (Tarjan).
fn circles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<&'a ModulePath, (usize, usize)>,
        stack: Vec<&'a ModulePath>,
        found: Vec<Vec<ModulePath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a ModulePath) {
            let order = self.index.len();
            self.index.insert(node, (order, order));
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                match self.index.get(next).copied() {
                    None => {
                        self.visit(next);
                        let low = self.index[next].1.min(self.index[node].1);
                        self.index.get_mut(node).unwrap().1 = low;
                    }
                    Some((seen, _)) if self.stack.contains(&next) => {
                        let low = seen.min(self.index[node].1);
                        self.index.get_mut(node).unwrap().1 = low;
                    }
                    Some(_) => {}
                }
            }
            if self.index[node].0 == self.index[node].1 {
                let at = self.stack.iter().rposition(|n| *n == node).unwrap();
                let component: Vec<ModulePath> = self.stack.drain(at..).cloned().collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}

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
    let a = references(
        &vec!["a".into()],
        "use crate::b::{Thing, other::X};\n",
        &modules,
    );
    let b = references(&vec!["b".into()], "fn f() { super::a::g(); }\n", &modules);
    assert_eq!(a, [vec!["b".to_owned()]].into());
    assert_eq!(b, [vec!["a".to_owned()]].into());
    let graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> =
        [(vec!["a".into()], a), (vec!["b".into()], b)].into();
    assert_eq!(circles(&graph).len(), 1);
    let test_only = production_code("#[cfg(test)]\nmod tests {\n    use crate::a::X;\n}\n");
    assert!(!test_only.contains("crate::a"), "{test_only}");
}
