//! Every HTTP client of Floodgate's is made one way (`floodgate_platform::outbound::client`), so
//! none keeps an idle connection past the moment a Floodgate listener closes it: a request
//! written into a connection as the server closes it fails with "error sending request" though
//! nobody refused it (a payment call and a webhook did, in a full test run: the provider's
//! client kept connections 90 s against the listeners' 10 s).

use std::path::Path;

/// The Rust files under `dir`, recursively.
fn rust_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_http_client_is_made_by_the_platforms_outbound_builder() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in [
        "booking", "gateway", "consumer", "sandbox", "platform", "loadgen", "client", "protocol",
    ] {
        rust_files(&repo.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 100, "{} files", files.len());
    let mut elsewhere = Vec::new();
    for file in &files {
        if file.ends_with("platform/src/outbound.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for made in [
            "reqwest::Client::builder(",
            "reqwest::Client::new(",
            "reqwest::ClientBuilder::new(",
            "reqwest::get(",
        ] {
            if text.contains(made) {
                elsewhere.push(format!("{}: {made}", file.display()));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "HTTP clients made without floodgate_platform::outbound::client: {elsewhere:#?}"
    );
}
