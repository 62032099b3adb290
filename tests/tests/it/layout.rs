//! The code's own shape, checked by the scripts in `deploy/` that `deploy/test.sh` runs: here
//! each is shown to fail on what it exists to catch, on a copy of the sources.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A folder removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `parts` of the repository (folders or files) copied into `copy`.
fn copy_into(copy: &Scratch, parts: &[&str]) {
    for part in parts {
        let to = copy.path().join(part);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let status = Command::new("cp")
            .arg("-R")
            .arg(repo().join(part))
            .arg(&to)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// A copy of the service sources in a fresh folder, to plant mistakes in.
fn sources() -> Scratch {
    let copy = Scratch(std::env::temp_dir().join(floodgate_tests::unique("layout-")));
    copy_into(
        &copy,
        &[
            "booking/src",
            "gateway/src",
            "consumer/src",
            "loadgen/src",
            "protocol/src",
            "platform/src",
            "sandbox/src",
            "client/src",
        ],
    );
    copy
}

fn check(root: &Path) -> (bool, String) {
    run("deploy/check-state-layer.sh", root)
}

fn run(script: &str, root: &Path) -> (bool, String) {
    let out = Command::new(repo().join(script))
        .arg(root)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn plant(root: &Path, file: &str, code: &str) {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    // Before the file's test module, where the check looks.
    let text = match text.find("#[cfg(test)]") {
        Some(at) => format!("{}{code}\n\n{}", &text[..at], &text[at..]),
        None => format!("{text}\n{code}\n"),
    };
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_state_layer_check_passes_on_this_tree_and_its_copy() {
    let (ok, out) = check(&repo());
    assert!(ok, "{out}");
    let copy = sources();
    let (ok, out) = check(copy.path());
    assert!(ok, "{out}");
}

#[test]
fn the_state_layer_check_fails_on_a_field_a_reply_index_or_a_key_outside_its_owners() {
    let mistakes = [
        (
            "field name",
            "fn fare(p: &mut redis::Pipeline, k: &str) { p.hget(k, \"fare_minor\"); }",
        ),
        (
            "reply index",
            "fn first(reply: &[String]) -> &str { &reply[0] }",
        ),
        (
            "key string",
            "fn rsv(base: &str, id: &str) -> String { format!(\"{base}:rsv:{id}\") }",
        ),
        (
            "key string",
            "fn meta(sale: &str) -> String { format!(\"fg:{{s:{sale}}}:meta\") }",
        ),
    ];
    for (what, code) in mistakes {
        for file in [
            "gateway/src/seats.rs",
            "booking/src/api.rs",
            "consumer/src/lib.rs",
        ] {
            let copy = sources();
            plant(copy.path(), file, code);
            let (ok, out) = check(copy.path());
            assert!(!ok, "{what} in {file} was not caught");
            assert!(
                out.contains(file) && out.contains(what),
                "{what} in {file}: {out}"
            );
        }
        // The layers that own the state may.
        for owner in [
            "gateway/src/scripts/room.rs",
            "booking/src/gatekeeper/mod.rs",
            "platform/src/state/mod.rs",
        ] {
            let copy = sources();
            plant(copy.path(), owner, code);
            let (ok, out) = check(copy.path());
            assert!(ok, "{what} in its owner {owner}: {out}");
        }
    }
}

#[test]
fn test_modules_may_read_raw_keys() {
    let copy = sources();
    let path = copy.path().join("gateway/src/seats.rs");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!(
            "{text}\n#[cfg(test)]\nmod raw {{\n    fn first(reply: &[String]) -> &str {{ &reply[0] }}\n}}\n"
        ),
    )
    .unwrap();
    let (ok, out) = check(copy.path());
    assert!(ok, "{out}");
}

/// A copy of everything the size check reads: the crates' Rust (the tests' too), the Lua, the
/// shell scripts and their list of what is owed, the page's JavaScript.
fn checked_files() -> Scratch {
    let copy = sources();
    copy_into(
        &copy,
        &[
            "tests/src",
            "tests/tests",
            "lua",
            "deploy",
            "static",
            ".gitignore",
        ],
    );
    // npm's module is not the page's own code: its folder is enough to say so.
    let _ = std::fs::remove_dir_all(copy.path().join("static/node_modules"));
    copy
}

/// `path` under `root` made `lines` long (padded with comments of its language, or cut).
fn make_long(root: &Path, path: &str, lines: usize) {
    let file = root.join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    let comment = if path.ends_with(".sh") {
        "# filler"
    } else {
        "// filler"
    };
    let kept: Vec<&str> = text.lines().take(lines).collect();
    let padding = vec![comment; lines.saturating_sub(kept.len())];
    std::fs::write(&file, [kept, padding].concat().join("\n") + "\n").unwrap();
}

/// The size check covers every file of the project's own code (Rust, the tests' too; Lua;
/// shell; the page's JavaScript): a file over 400 lines fails it, unless deploy/
/// file-sizes-owed.txt lists it, and then only if it grew past what it is owed; a listed file
/// that fits again must leave the list.
#[test]
fn the_file_size_check_fails_on_a_file_over_400_lines_or_past_what_it_is_owed() {
    let (ok, out) = run("deploy/check-file-sizes.sh", &repo());
    assert!(ok, "{out}");
    let owed = std::fs::read_to_string(repo().join("deploy/file-sizes-owed.txt")).unwrap();
    let owed: Vec<(&str, usize)> = owed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (path, most) = l.split_once(' ').unwrap();
            (path, most.parse().unwrap())
        })
        .collect();
    let copy = checked_files();
    let (ok, out) = run("deploy/check-file-sizes.sh", copy.path());
    assert!(ok, "the copy passes as the tree does: {out}");
    for (path, lines) in [
        ("client/src/room.rs", 401),
        ("lua/ack.lua", 401),
        ("deploy/stack.sh", 401),
        ("static/signin.js", 401),
        ("tests/tests/it/architecture.rs", 401),
    ] {
        let copy = checked_files();
        make_long(copy.path(), path, lines);
        let (ok, out) = run("deploy/check-file-sizes.sh", copy.path());
        assert!(!ok, "{path} at {lines} lines passed");
        assert!(out.contains(&format!("{path}: {lines} lines")), "{out}");
    }
    let (listed, most) = owed[0];
    let copy = checked_files();
    make_long(copy.path(), listed, most + 1);
    let (ok, out) = run("deploy/check-file-sizes.sh", copy.path());
    assert!(
        !ok && out.contains("it may only shrink"),
        "{listed} grew: {out}"
    );
    let copy = checked_files();
    make_long(copy.path(), listed, 400);
    let (ok, out) = run("deploy/check-file-sizes.sh", copy.path());
    assert!(!ok && out.contains("take it off"), "{listed} fits: {out}");
}

/// The crate roots whose `//! # Layout` map a newcomer reads first.
const ROOTS: [&str; 8] = [
    "protocol/src/lib.rs",
    "platform/src/lib.rs",
    "sandbox/src/lib.rs",
    "booking/src/lib.rs",
    "gateway/src/lib.rs",
    "consumer/src/lib.rs",
    "client/src/lib.rs",
    "loadgen/src/main.rs",
];

/// The `# Layout` section of a crate root's documentation: its `//!` lines from the heading to
/// the first blank one after a list item's end (the prose that follows the list is not the map).
fn layout_map(root: &str) -> Vec<String> {
    let docs: Vec<&str> = root
        .lines()
        .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
        .filter_map(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let start = docs
        .iter()
        .position(|l| *l == "# Layout")
        .expect("a `//! # Layout` heading");
    docs[start + 1..]
        .iter()
        .take_while(|l| !l.is_empty())
        .map(|l| (*l).to_owned())
        .collect()
}

/// The names in backticks on `lines` (`name`, [`name`], `name/`, `name.rs`).
fn ticked(lines: &[String]) -> Vec<String> {
    lines
        .join(" ")
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| {
            name.trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect()
}

/// The modules a crate root declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_modules(root: &str) -> Vec<String> {
    root.lines()
        .filter_map(|l| {
            let l = l
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

/// Every crate's `# Layout` map names every module the crate has, and each of its entries
/// starts with a module of the crate (or an item of the root itself): a module added or
/// renamed without its line in the map fails here.
#[test]
fn every_layout_map_names_the_crates_modules_and_nothing_else() {
    let mut wrong = Vec::new();
    for path in ROOTS {
        let root = std::fs::read_to_string(repo().join(path)).unwrap();
        let map = layout_map(&root);
        let named = ticked(&map);
        let modules = declared_modules(&root);
        for module in &modules {
            if !named.contains(module) {
                wrong.push(format!(
                    "{path}: module {module} is not in the # Layout map"
                ));
            }
        }
        for entry in map.iter().filter(|l| l.starts_with("- ")) {
            let first = ticked(std::slice::from_ref(entry)).into_iter().next();
            let Some(first) = first else {
                wrong.push(format!("{path}: a map entry names no module: {entry}"));
                continue;
            };
            let module = first.split("::").next().unwrap_or_default().to_owned();
            let an_item = ["fn", "struct", "enum", "const", "type"]
                .iter()
                .any(|kind| root.contains(&format!("pub {kind} {module}")));
            if !(modules.contains(&module) || module == "lib" || an_item) {
                wrong.push(format!(
                    "{path}: the map names {module}, which is no module of it"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
