//! The code's layout: imports inside `backend/` (each store's folder, and
//! the seams beside them) and inside the chaos harness run one way, so no
//! two files of one folder import each other, directly or around a circle;
//! every backend folder keeps the contract CONTRIBUTING.md writes down;
//! and every public async fn says what cancelling it does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The files of one folder and, for each, the siblings it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![path.to_string()];
    };
    let prefix = &tree[..open];
    // Text that only looks like a use tree (a `use ` inside a string) may
    // have no closing brace after its opening one.
    let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| match p {
            "self" => vec![prefix.trim_end_matches(':').to_string()],
            p => expand(p)
                .into_iter()
                .map(|e| format!("{prefix}{e}"))
                .collect(),
        })
        .collect()
}

/// The code of a file without comments and without its test module.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file");
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names: its `use` trees expanded, and the paths it
/// writes out in its code.
fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for statement in code.split(';') {
        if let Some(at) = statement.find("use ") {
            let before = &statement[..at];
            if before.trim().is_empty()
                || before.trim_end().ends_with("pub")
                || before.contains(')')
            {
                let words: Vec<&str> = statement[at + 4..].split_whitespace().collect();
                let tree = words.join(" ").replace(" as ", "\0").replace(' ', "");
                found.extend(expand(&tree.replace('\0', " as ")));
            }
        }
    }
    let words = code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'));
    found.extend(
        words
            .filter(|w| w.starts_with("super::") || w.starts_with("crate::"))
            .map(String::from),
    );
    found
}

/// The import graph of the files of folder `dir`, whose module path is
/// `module` (`crate::backend::redis`); names re-exported by its `mod.rs`
/// (or `lib.rs`) count as imports of the file that defines them.
fn graph(dir: &Path, module: &str) -> Graph {
    let files: BTreeSet<String> = std::fs::read_dir(dir)
        .expect("a source folder")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".rs").map(String::from))
        .filter(|n| !matches!(n.as_str(), "mod" | "lib" | "main"))
        .collect();
    let mut reexported = BTreeMap::new();
    for root in ["mod.rs", "lib.rs"] {
        let path = dir.join(root);
        if path.exists() {
            for path in paths(&code(&path)) {
                let mut segments = path.split("::");
                if let (Some(first), Some(last)) = (segments.next(), path.rsplit("::").next()) {
                    if files.contains(first) {
                        reexported.insert(last.to_string(), first.to_string());
                    }
                }
            }
        }
    }
    let mut graph = Graph::new();
    for file in &files {
        let mut imports = BTreeSet::new();
        for path in paths(&code(&dir.join(format!("{file}.rs")))) {
            let rest = match path.strip_prefix("super::") {
                Some(rest) => rest,
                None => match path.strip_prefix(&format!("{module}::")) {
                    Some(rest) => rest,
                    None => continue,
                },
            };
            let first = rest.split("::").next().unwrap_or_default();
            let target = if files.contains(first) {
                first.to_string()
            } else if let Some(defined) = reexported.get(first) {
                defined.clone()
            } else {
                continue;
            };
            if &target != file {
                imports.insert(target);
            }
        }
        graph.insert(file.clone(), imports);
    }
    graph
}

/// A circle of imports in `graph`, if there is one.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_of_the_backends_or_the_chaos_harness_imports_in_a_circle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let backend = crates.join("lockward/src/backend");
    let mut folders = vec![
        (backend.clone(), "crate::backend".to_string()),
        (crates.join("lockward-chaos/src"), "crate".to_string()),
    ];
    for entry in std::fs::read_dir(&backend).expect("backend/") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            folders.push((path, format!("crate::backend::{name}")));
        }
    }
    assert!(
        folders.len() >= 11,
        "the stores' nine folders, backend/ and the chaos harness"
    );
    for (dir, module) in folders {
        let graph = graph(&dir, &module);
        assert!(!graph.is_empty(), "{}: no files read", dir.display());
        if let Some(found) = circle(&graph) {
            panic!(
                "{}: imports run in a circle: {}",
                dir.display(),
                found.join(" -> ")
            );
        }
    }
}

/// The `.rs` files below `dir`.
fn sources(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

#[test]
fn every_public_async_fn_says_what_cancelling_it_does() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    let mut seen = 0;
    for path in sources(&src) {
        let text = std::fs::read_to_string(&path).expect("a source file");
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("pub async fn ") {
                continue;
            }
            seen += 1;
            // The item's docs and attributes: back to the blank line before.
            let doc = lines[..at]
                .iter()
                .rev()
                .take_while(|l| !l.trim().is_empty())
                .any(|l| l.trim_start().starts_with("/// Cancellation: "));
            if !doc {
                missing.push(format!("{}:{}", path.display(), at + 1));
            }
        }
    }
    assert!(seen > 100, "only {seen} public async fns found");
    assert!(
        missing.is_empty(),
        "a doc paragraph starting `Cancellation: ` is missing at:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_checker_finds_a_circle() {
    let mut graph = Graph::new();
    graph.insert("a".into(), ["b".to_string()].into());
    graph.insert("b".into(), ["c".to_string()].into());
    graph.insert("c".into(), ["a".to_string()].into());
    assert_eq!(circle(&graph).map(|c| c.len()), Some(4));
    graph.get_mut("c").unwrap().clear();
    assert_eq!(circle(&graph), None);
    assert_eq!(
        expand("super::{a,b::{c,d as e}}"),
        ["super::a", "super::b::c", "super::b::d"]
    );
}

/// A line of code that only declares modules or what they export.
fn declares(line: &str) -> bool {
    let line = line.trim();
    line.is_empty()
        || line.starts_with("//")
        || line.starts_with("#[cfg")
        || ["mod ", "pub mod ", "pub(crate) mod ", "pub use ", "pub(crate) use ", "use "]
            .iter()
            .any(|start| line.starts_with(start))
        // The rest of a `pub use a::{b, c};` that rustfmt wrapped.
        || line.ends_with("};")
        || line.ends_with(',')
}

/// CONTRIBUTING.md's backend contract, on the tree: every store's folder
/// has `mod.rs` (declarations only), `url.rs` and `doctor.rs`; each of its
/// backend types is named for the store (and its mode, where it has
/// several: `PostgresLeaseBackend`, `MysqlNamedBackend`); and each file
/// that declares a type's `CAPABILITIES` defines that type.
#[test]
fn every_backend_folder_keeps_the_contract() {
    let backend = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend");
    let mut folders = 0;
    for entry in std::fs::read_dir(&backend).expect("the backend folder") {
        let dir = entry.expect("an entry").path();
        if !dir.is_dir() {
            continue;
        }
        folders += 1;
        let store = dir.file_name().unwrap().to_string_lossy().to_string();
        for needed in ["mod.rs", "url.rs", "doctor.rs"] {
            // memory:// has nothing in its URL to parse.
            if store == "memory" && needed == "url.rs" {
                continue;
            }
            assert!(
                dir.join(needed).is_file(),
                "backend/{store}/ has no {needed}"
            );
        }
        let module = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
        for line in module.lines() {
            assert!(
                declares(line),
                "backend/{store}/mod.rs holds code, not only declarations: {line:?} (move it to a file of its own)"
            );
        }
        let prefix: String = store[..1].to_uppercase() + &store[1..];
        for file in sources(&dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            let types: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("pub struct "))
                .filter_map(|l| l.split(|c: char| !c.is_alphanumeric()).next())
                .filter(|name| name.ends_with("Backend"))
                .collect();
            for name in &types {
                assert!(
                    name.starts_with(&prefix),
                    "{}: backend type {name} does not say its store ({prefix}…)",
                    file.display()
                );
            }
            if text.contains("pub const CAPABILITIES") {
                assert!(
                    !types.is_empty(),
                    "{}: CAPABILITIES away from the backend type it describes",
                    file.display()
                );
            }
        }
    }
    assert!(folders >= 9, "only {folders} backend folders found");
}
