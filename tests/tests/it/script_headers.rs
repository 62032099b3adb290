//! Every Lua script's header says what its declaration in Rust passes (`floodgate_platform::
//! script`): each of its `KEYS[n]` and `ARGV[n]`, in order, in the words the declaration gives
//! them; no more, unless the script takes a variable tail (`KEYS[n..]`, `ARGV[n..]`); and every
//! script of `lua/` is declared exactly once.

use std::collections::BTreeMap;

use floodgate_platform::script::{Declaration, Helpers};
use floodgate_tests::containers::repo;

fn declared() -> Vec<&'static Declaration> {
    [
        floodgate_platform::scripts::DECLARED,
        floodgate_gateway::scripts::DECLARED,
        floodgate_booking::gatekeeper::scripts::DECLARED,
    ]
    .concat()
}

/// A script's header (its leading comment lines) as one line of words.
fn header(body: &str) -> String {
    let lines: Vec<&str> = body
        .lines()
        .take_while(|l| l.starts_with("--"))
        .map(|l| l.trim_start_matches('-').trim())
        .collect();
    lines
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the header says after each `<what>[n]`: n to the words up to the next `KEYS[`/`ARGV`.
fn described(header: &str, what: &str) -> BTreeMap<usize, String> {
    let mut found = BTreeMap::new();
    let marker = format!("{what}[");
    let mut rest = header;
    while let Some(at) = rest.find(&marker) {
        rest = &rest[at + marker.len()..];
        let Some(close) = rest.find(']') else { break };
        let Ok(n) = rest[..close].parse::<usize>() else {
            continue; // `KEYS[8..]`: a tail, checked by its own words
        };
        let words = &rest[close + 1..];
        let end = ["KEYS[", "ARGV[", "ARGV,", "ARGV pairs", "KEYS:"]
            .iter()
            .filter_map(|m| words.find(m))
            .min()
            .unwrap_or(words.len());
        found
            .entry(n)
            .or_insert_with(|| words[..end].trim().to_owned());
    }
    found
}

/// The mismatches between one declaration and the headers (its own, and `lib.lua`'s for the
/// pool layout).
fn mismatches(d: &Declaration, lib: &str) -> Vec<String> {
    let own = header(d.body);
    let mut wrong = Vec::new();
    let mut expect =
        |said: &BTreeMap<usize, String>, n: usize, name: &str, words: &str| match said.get(&n) {
            Some(text) if text.starts_with(words) => {}
            Some(text) => wrong.push(format!(
                "{}: [{n}] {name} is declared \"{words}\", the header says \"{text}\"",
                d.file
            )),
            None => wrong.push(format!(
                "{}: [{n}] {name} (\"{words}\") is not in the header",
                d.file
            )),
        };
    let keys = described(&own, "KEYS");
    let layout = d.layout.unwrap_or_default();
    // The pool scripts' common layout is documented once, in lib.lua; any other layout by the
    // script itself.
    let lib_keys = if d.helpers == Helpers::Pool {
        described(&header(lib), "KEYS")
    } else {
        keys.clone()
    };
    for (i, (name, words)) in layout.iter().enumerate() {
        expect(&lib_keys, i + 1, name, words);
    }
    for (i, (name, words)) in d.keys.iter().enumerate() {
        expect(&keys, layout.len() + i + 1, name, words);
    }
    let args = described(&own, "ARGV");
    let arg_layout = d.arg_layout.unwrap_or_default();
    for (i, (name, words)) in arg_layout.iter().chain(d.args).enumerate() {
        expect(&args, i + 1, name, words);
    }
    let arg_count = arg_layout.len() + d.args.len();
    let key_count = layout.len() + d.keys.len();
    if d.rest_keys.is_none() {
        if let Some(extra) = keys.keys().find(|n| **n > key_count) {
            wrong.push(format!(
                "{}: the header documents KEYS[{extra}], the declaration {key_count} keys",
                d.file
            ));
        }
    }
    if d.rest.is_none() {
        if let Some(extra) = args.keys().find(|n| **n > arg_count) {
            wrong.push(format!(
                "{}: the header documents ARGV[{extra}], the declaration {arg_count} arguments",
                d.file
            ));
        }
    }
    for (name, words) in d.rest_keys.iter().chain(d.rest.iter()) {
        if !own.contains(words) {
            wrong.push(format!(
                "{}: the tail {name} (\"{words}\") is not in the header",
                d.file
            ));
        }
    }
    wrong
}

#[test]
fn every_script_header_says_what_its_declaration_passes() {
    let lib = std::fs::read_to_string(repo().join("lua/lib.lua")).unwrap();
    let wrong: Vec<String> = declared()
        .into_iter()
        .flat_map(|d| mismatches(d, &lib))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_script_is_declared_once() {
    let helpers = ["clock.lua", "lib.lua", "sale_lib.lua"];
    let mut files: Vec<String> = std::fs::read_dir(repo().join("lua"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".lua") && !helpers.contains(&f.as_str()))
        .collect();
    files.sort();
    let mut declared: Vec<String> = declared().iter().map(|d| d.file.to_owned()).collect();
    declared.sort();
    assert_eq!(declared, files);
}

/// The check finds a declaration that disagrees with its header: a key too many, an argument
/// out of order, words that are not the header's.
#[test]
fn the_check_catches_a_declaration_that_drifted() {
    let lib = "-- KEYS[1] cfg hash";
    let body = "-- x: a script\n-- KEYS[1] the pool   KEYS[2] held\n-- ARGV[1] seats   ARGV[2] ticket\nreturn 1";
    let good = Declaration {
        file: "x.lua",
        body,
        helpers: Helpers::None,
        layout: None,
        keys: &[("pool", "the pool"), ("held", "held")],
        rest_keys: None,
        arg_layout: None,
        args: &[("seats", "seats"), ("ticket", "ticket")],
        rest: None,
    };
    assert!(mismatches(&good, lib).is_empty());
    let swapped = Declaration {
        args: &[("ticket", "ticket"), ("seats", "seats")],
        ..good
    };
    assert_eq!(mismatches(&swapped, lib).len(), 2);
    let short = Declaration {
        keys: &[("pool", "the pool")],
        ..good
    };
    assert_eq!(mismatches(&short, lib).len(), 1);
    let tail = Declaration {
        rest: Some(("more", "more tickets")),
        ..good
    };
    assert_eq!(mismatches(&tail, lib).len(), 1);
}
