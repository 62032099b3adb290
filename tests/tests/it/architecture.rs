//! ARCHITECTURE.md is a map a newcomer follows by hand: every file, folder and Rust item it
//! names in backticks exists where it says (issue 50). A function moved or renamed without its
//! line here fails this test, instead of sending the next reader to a name that is gone.

use std::path::{Path, PathBuf};

/// The crates whose items ARCHITECTURE.md names, by the name it uses for each.
const CRATES: [&str; 9] = [
    "protocol", "platform", "gateway", "booking", "consumer", "sandbox", "client", "loadgen",
    "tests",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The spans in backticks of `text`.
fn ticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The Rust files under `dir`, recursively (none if it is not a folder).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for path in entries.map(|e| e.unwrap().path()) {
        if path.is_dir() {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

/// Whether `name` is the whole word at `at` in `text`.
fn word_at(text: &str, at: usize, name: &str) -> bool {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let end = at + name.len();
    (at == 0 || !ident(bytes[at - 1])) && (end == bytes.len() || !ident(bytes[end]))
}

/// Whether `source` defines `name`: a function, type, trait, constant, static, module or macro
/// of that name, or an enum variant (a line that starts with it).
fn defines(source: &str, name: &str) -> bool {
    const KINDS: [&str; 9] = [
        "fn ",
        "struct ",
        "enum ",
        "trait ",
        "const ",
        "static ",
        "type ",
        "mod ",
        "macro_rules! ",
    ];
    source.match_indices(name).any(|(at, _)| {
        if !word_at(source, at, name) {
            return false;
        }
        let before = source[..at].trim_end_matches(' ');
        let line_start = source[..at].rfind('\n').map_or(0, |n| n + 1);
        let variant = source[line_start..at].trim().is_empty()
            && source[at + name.len()..]
                .chars()
                .next()
                .is_some_and(|c| matches!(c, ',' | '(' | ' ' | '{'));
        variant
            || KINDS
                .iter()
                .any(|k| before.ends_with(k.trim_end()) && source[..at].ends_with(' '))
    })
}

/// The file of module `path` in `krate` (its `.rs` or its folder's `mod.rs`), and the files it
/// spans (a folder module's every file).
fn module(krate: &Path, path: &[&str]) -> Option<Vec<PathBuf>> {
    let src = krate.join("src");
    if path.is_empty() {
        let all = rust_files(&src);
        return (!all.is_empty()).then_some(all);
    }
    let joined = path.join("/");
    let file = src.join(format!("{joined}.rs"));
    let folder = src.join(&joined);
    let mut files: Vec<PathBuf> = rust_files(&folder);
    if file.is_file() {
        files.push(file);
    }
    (!files.is_empty()).then_some(files)
}

/// Whether the Rust path `name` (`gateway::join::join_queue`, `session::Session`,
/// `gatekeeper::Gatekeeper::reserve`) names something that exists: its longest prefix that is a
/// module (of the crate it names, or of whichever crates have the longest such prefix), then
/// each further segment (an item, then a method, a variant, an associated item) defined in
/// that module's files. A function that moved to another module is not found in its old one.
fn resolves(name: &str) -> bool {
    let segments: Vec<&str> = name.split("::").collect();
    let (crates, rest): (Vec<&str>, &[&str]) = match segments[0]
        .strip_prefix("floodgate_")
        .unwrap_or(segments[0])
    {
        first if CRATES.contains(&first) => (vec![first], &segments[1..]),
        _ => (CRATES.to_vec(), &segments[..]),
    };
    // Each crate's longest module prefix, and that module's files.
    let found: Vec<(usize, Vec<PathBuf>)> = crates
        .iter()
        .filter_map(|krate| {
            let krate = repo().join(krate);
            (0..=rest.len())
                .rev()
                .find_map(|k| module(&krate, &rest[..k]).map(|files| (k, files)))
        })
        .collect();
    let Some(longest) = found.iter().map(|(k, _)| *k).max() else {
        return false;
    };
    found
        .iter()
        .filter(|(k, _)| *k == longest)
        .any(|(k, files)| {
            let sources: Vec<String> = files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap())
                .collect();
            rest[*k..]
                .iter()
                .all(|item| sources.iter().any(|s| defines(s, item)))
        })
}

/// Whether the path `name` (`room/board.rs`, `lua/ack.lua`, `deploy/ws-peer/`) is a file or
/// folder of the repository: from its root, or from a crate's root or its `src/`, or from
/// `deploy/` (the map's sections name paths from their crate or folder).
fn exists(name: &str) -> bool {
    let name = name.trim_end_matches('/');
    let mut roots = vec![repo(), repo().join("deploy")];
    for krate in CRATES {
        roots.push(repo().join(krate));
        roots.push(repo().join(krate).join("src"));
    }
    roots.iter().any(|root| root.join(name).exists())
}

#[test]
fn every_path_and_item_the_architecture_names_exists() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let (mut paths, mut items) = (0, 0);
    for span in ticked(&text) {
        let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:".contains(c);
        if span.is_empty() || !span.chars().all(plain) || span.starts_with('/') {
            continue;
        }
        if span.contains("::") {
            items += 1;
            if !resolves(span) {
                missing.push(span.to_owned());
            }
        } else if span.contains('/') {
            paths += 1;
            if !exists(span) {
                missing.push(span.to_owned());
            }
        }
    }
    assert!(
        paths > 50 && items > 30,
        "{paths} paths, {items} items read"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist: {missing:#?}"
    );
}

/// Every migration is named in the code map (as `…_<name>.sql`), so the schema's history reads
/// whole there.
#[test]
fn the_architecture_names_every_migration() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let mut unnamed = Vec::new();
    for entry in std::fs::read_dir(repo().join("migrations")).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        let Some((_, name)) = file.split_once('_') else {
            continue;
        };
        if !text.contains(&format!("`…_{name}`")) {
            unnamed.push(file);
        }
    }
    assert!(
        unnamed.is_empty(),
        "migrations ARCHITECTURE.md does not name: {unnamed:?}"
    );
}

/// The resolver itself: what exists is found, what does not is not.
#[test]
fn the_resolver_finds_what_exists_and_only_that() {
    assert!(resolves("gateway::join::join_queue") || resolves("platform::listener::Limits"));
    assert!(resolves("platform::listener::Limits"));
    assert!(resolves("floodgate_platform::outbound::POOL_IDLE"));
    assert!(resolves("platform::outbound::client"));
    assert!(!resolves("platform::outbound::no_such_thing"));
    assert!(!resolves("platform::no_such_module::client"));
    // A function named from a module it is not in: the old home of a moved one.
    assert!(!resolves("platform::listener::client"));
    assert!(exists("lua/ack.lua") && exists("room/board.rs") && exists("deploy/ws-peer/"));
    assert!(!exists("lua/no_such.lua"));
}
