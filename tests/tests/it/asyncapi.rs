//! The AsyncAPI document of the waiting room's WebSocket (docs/asyncapi.yaml, issue 17): valid
//! by `@asyncapi/parser`, and complete: every message type `protocol` sends or takes and every
//! close code it names is in it. The close codes are read from `protocol/src/ws.rs`'s source,
//! the message types from `protocol::ws`, and the document by the parser, not by the Rust types.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use floodgate_protocol::ws::{ClientMessage, ServerMessage};
use floodgate_tests::unique;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What the parser says the document at `path` declares: (message types, close codes).
fn declared(path: &Path) -> Result<(BTreeSet<String>, BTreeSet<u64>), String> {
    let out = Command::new("node")
        .arg(repository().join("tests/browser/asyncapi.mjs"))
        .arg(path)
        .output()
        .expect("node runs (deploy/stack.sh up installs the parser)");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["version"], "3.0.0");
    let types = said["types"].as_array().unwrap().iter();
    let codes = said["close_codes"].as_array().unwrap().iter();
    Ok((
        types.map(|t| t.as_str().unwrap().to_owned()).collect(),
        codes.map(|c| c.as_u64().unwrap()).collect(),
    ))
}

/// Every close code `protocol::ws::close` names, read from its source.
fn protocol_close_codes() -> BTreeSet<u64> {
    let source = std::fs::read_to_string(repository().join("protocol/src/ws.rs")).unwrap();
    let module = source
        .split("pub mod close {")
        .nth(1)
        .expect("protocol::ws::close");
    let module = &module[..module.find("\n}").unwrap()];
    module
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .map(|line| {
            let value = line.split("= ").nth(1).unwrap().trim_end_matches(';');
            value.parse().unwrap()
        })
        .collect()
}

fn protocol_types() -> BTreeSet<String> {
    let server = ServerMessage::one_of_each()
        .into_iter()
        .map(|m| serde_json::to_value(m).unwrap());
    let client = ClientMessage::one_of_each()
        .into_iter()
        .map(|m| serde_json::to_value(m).unwrap());
    server
        .chain(client)
        .map(|json| json["type"].as_str().unwrap().to_owned())
        .collect()
}

/// What `protocol` has that the document lacks: (types, close codes).
fn missing(path: &Path) -> (Vec<String>, Vec<u64>) {
    let (types, codes) = declared(path).unwrap();
    (
        protocol_types().difference(&types).cloned().collect(),
        protocol_close_codes().difference(&codes).copied().collect(),
    )
}

#[test]
fn the_asyncapi_document_describes_every_message_and_close_code() {
    let document = repository().join("docs/asyncapi.yaml");
    assert_eq!(
        protocol_close_codes().len(),
        14,
        "the close codes were read"
    );
    assert_eq!(missing(&document), (vec![], vec![]), "docs/asyncapi.yaml");
    // The Rust client names every documented code (the JavaScript client's own test checks its).
    let (_, documented) = declared(&document).unwrap();
    for code in documented {
        let code = u16::try_from(code).unwrap();
        let named = floodgate_client::CloseCode::from_u16(code);
        assert_ne!(named, floodgate_client::CloseCode::Other(code), "{code}");
    }

    // Without a message or a close code, the check fails and names what is missing.
    let text = std::fs::read_to_string(&document).unwrap();
    let without = text
        .replace(
            "      pong:\n        $ref: '#/components/messages/pong'\n",
            "",
        )
        .replace("      - $ref: '#/channels/room/messages/pong'\n", "");
    let without = without
        .split("    pong:\n      name: pong")
        .next()
        .unwrap()
        .to_owned()
        + "    ping:\n      name: ping"
        + text.split("    ping:\n      name: ping").nth(1).unwrap();
    let without = &without[..without.find("  - code: 4503").unwrap()];
    let path = std::env::temp_dir().join(unique("floodgate-asyncapi-") + ".yaml");
    std::fs::write(&path, without).unwrap();
    let found = missing(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(found, (vec!["pong".to_owned()], vec![4503]));
}

#[test]
fn an_invalid_asyncapi_document_is_refused_by_the_parser() {
    let text = std::fs::read_to_string(repository().join("docs/asyncapi.yaml")).unwrap();
    // An operation on a channel that does not exist.
    let broken = text.replace(
        "      $ref: '#/channels/room'\n",
        "      $ref: '#/channels/lobby'\n",
    );
    let path = std::env::temp_dir().join(unique("floodgate-asyncapi-") + ".yaml");
    std::fs::write(&path, broken).unwrap();
    let result = declared(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(result.is_err(), "{result:?}");
}
