//! The import graph of a crate's modules, read from its source: code as code (no comments, literals or test items), paths resolved to modules, re-exports followed, arrows lifted to siblings (its circles: `circles.rs`).

use super::*;

/// A module's path inside its crate: `room/driver.rs` is `["room", "driver"]`, `room/mod.rs` is
/// `["room"]`, the crate root is `[]`.
pub(super) type ModulePath = Vec<String>;

pub(super) fn module_of(relative: &Path) -> ModulePath {
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
pub(super) fn rust_files(root: &Path, dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(root, &path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path.strip_prefix(root).unwrap().to_owned());
        }
    }
}

/// `source` as code only: comments gone, string and character literals emptied (a brace or a
/// `//` inside one is text, not code), and the items under `#[cfg(test)]` left out (a test module
/// may reach anywhere; the production graph is what must have no circle).
pub(super) fn production_code(source: &str) -> String {
    let code = without_comments_and_literals(source);
    let mut kept = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        rest = &rest[at + "#[cfg(test)]".len()..];
        // The item ends at its `;` if that comes before any body, else at its body's closing brace.
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    kept.push_str(rest);
    kept
}

/// `source` with its comments removed and the insides of its string, raw string and character
/// literals dropped (their quotes stay, so the code around them still reads as code).
pub(super) fn without_comments_and_literals(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        match (chars[i], next) {
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            ('r', Some('#' | '"')) if i == 0 || !is_ident(chars[i - 1]) => {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                if chars.get(i + 1 + hashes) != Some(&'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                i += hashes + 2;
                while i < chars.len()
                    && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|c| *c == '#'))
                {
                    i += 1;
                }
                i += hashes + 1;
                out.push_str("\"\"");
            }
            ('"', _) => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            ('\'', Some(c)) if c == '\\' || chars.get(i + 2) == Some(&'\'') => {
                // Past the quote and the character, or the backslash and the escaped one.
                i += if c == '\\' { 3 } else { 2 };
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

pub(super) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a use tree starting at `text` (`a::b::{c, d::e}` gives `a::b::c`, `a::b::d::e`),
/// each as its segments; an expression's path (`a::b::f(x)`) ends where the path does.
pub(super) fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
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

/// What `module`'s code refers to: every `crate::`, `self::` and `super::` path, and a `use` of
/// a child module by its bare name, each resolved to the deepest module it names and the item
/// it names there, if any (`crate::a::b::Thing` is module `a::b`, item `Thing`).
pub(super) fn references(
    module: &ModulePath,
    code: &str,
    modules: &BTreeSet<ModulePath>,
) -> BTreeSet<(ModulePath, Option<String>)> {
    let mut found = BTreeSet::new();
    let mut resolve = |base: ModulePath, path: &[String]| {
        let mut target = base;
        let mut rest = path.iter();
        let item = loop {
            let Some(segment) = rest.next() else {
                break None;
            };
            let mut deeper = target.clone();
            deeper.push(segment.clone());
            if !modules.contains(&deeper) {
                break Some(segment.clone());
            }
            target = deeper;
        };
        found.insert((target, item));
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
    for (tree_at, _) in use_statements(code) {
        let child = code[tree_at..]
            .split(|c: char| !is_ident(c))
            .next()
            .unwrap_or("");
        let mut path = module.clone();
        path.push(child.to_owned());
        if modules.contains(&path) {
            for path in use_tree(&code[tree_at..]).0 {
                resolve(module.clone(), &path);
            }
        }
    }
    found
}

/// Where each `use` statement's tree starts in `code`, and whether the statement re-exports
/// (`pub use`, `pub(crate) use`, `pub(super) use`).
pub(super) fn use_statements(code: &str) -> Vec<(usize, bool)> {
    let mut statements = Vec::new();
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let (public, rest) = match ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p))
        {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        if let Some(tree) = rest.strip_prefix("use ") {
            statements.push((start + line.len() - tree.len(), public));
        }
    }
    statements
}

/// The items `module` re-exports from elsewhere in its crate: name -> the module it lives in
/// (`pub use requests::ReserveRequest;` in `gatekeeper` sends `super::ReserveRequest` of a
/// sibling to `gatekeeper::requests`, not to `gatekeeper`).
pub(super) fn reexports(
    module: &ModulePath,
    code: &str,
    modules: &BTreeSet<ModulePath>,
) -> BTreeMap<String, ModulePath> {
    let mut items = BTreeMap::new();
    for (tree_at, public) in use_statements(code) {
        if !public {
            continue;
        }
        let end = code[tree_at..]
            .find(';')
            .map_or(code.len(), |e| tree_at + e);
        let statement = format!("use {};", &code[tree_at..end]);
        for (target, item) in references(module, &statement, modules) {
            if let Some(item) = item {
                items.insert(item, target);
            }
        }
    }
    items
}

/// The import graph of a crate's modules, lifted to siblings: when anything under `a` refers to
/// anything under `b`, the arrow is drawn between the two children of their nearest common
/// parent (`room::driver` using `room::controller` is an arrow between those two; `signin::flow`
/// using `sandbox` is an arrow from `signin` to `sandbox`). A module and its own descendants are
/// one unit: a parent using its children and a child its parent's items is no circle.
pub(super) fn import_graph(crate_dir: &str) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    let modules: BTreeSet<ModulePath> = files.iter().map(|f| module_of(f)).collect();
    let code: BTreeMap<ModulePath, String> = files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            (module_of(file), production_code(&text))
        })
        .collect();
    let exported: BTreeMap<&ModulePath, BTreeMap<String, ModulePath>> = code
        .iter()
        .map(|(module, code)| (module, reexports(module, code, &modules)))
        .collect();
    let mut graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (from, code) in &code {
        for (mut to, mut item) in references(from, code, &modules) {
            // Through re-exports to where the item lives (a few hops at most).
            for _ in 0..4 {
                let Some(home) = item.as_ref().and_then(|name| exported.get(&to)?.get(name)) else {
                    break;
                };
                if *home == to {
                    break;
                }
                to = home.clone();
                item = None;
            }
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
