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

/// A copy of the service sources in a fresh folder, to plant mistakes in.
fn sources() -> Scratch {
    let copy = Scratch(std::env::temp_dir().join(floodgate_tests::unique("layout-")));
    for crate_src in [
        "booking/src",
        "gateway/src",
        "consumer/src",
        "loadgen/src",
        "contract/src",
        "client/src",
    ] {
        let to = copy.path().join(crate_src);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let status = Command::new("cp")
            .arg("-R")
            .arg(repo().join(crate_src))
            .arg(&to)
            .status()
            .unwrap();
        assert!(status.success());
    }
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
            "contract/src/state/mod.rs",
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

#[test]
fn the_file_size_check_fails_on_a_source_file_over_500_lines() {
    let (ok, out) = run("deploy/check-file-sizes.sh", &repo());
    assert!(ok, "{out}");
    let copy = sources();
    let path = copy.path().join("client/src/room.rs");
    let text = std::fs::read_to_string(&path).unwrap();
    let padding = "// filler\n".repeat(501 - text.lines().count());
    std::fs::write(&path, format!("{text}{padding}")).unwrap();
    let (ok, out) = run("deploy/check-file-sizes.sh", copy.path());
    assert!(!ok, "a 501-line file passed");
    assert!(out.contains("client/src/room.rs: 501 lines"), "{out}");
}
