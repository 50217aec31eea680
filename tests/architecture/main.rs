//! The structure docs/architecture.md describes, held by a test: the
//! provider's components import each other in one direction only, no
//! modules import each other in a circle, and no part is larger than a
//! newcomer can hold (`sizes.rs`).

mod sizes;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Which components each component may import (besides the shared
/// vocabulary in [`SHARED`]), in the order of the data path.
const ALLOWED: &[(&str, &[&str])] = &[
    (
        "boundary",
        &["runtime", "engine", "request", "local", "config"],
    ),
    // `fault`: the hooks of test builds (feature fault-injection).
    (
        "runtime",
        &["engine", "discovery", "request", "local", "config", "fault"],
    ),
    ("engine", &["discovery", "request", "local", "config"]),
    ("fault", &["engine"]),
    ("discovery", &["local", "config"]),
    ("request", &[]),
    ("local", &[]),
    ("config", &[]),
];

/// Modules every component may use: plain types and tools with no
/// knowledge of the provider's components.
const SHARED: &[&str] = &[
    "addr", "ib", "bounded", "fastmap", "summary", "threads", "daemon", "log", "metrics",
    "entropy", "buggify", "handle", "control",
];

/// Every `.rs` file under `dir`, into `out`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read a source folder") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A source file's component: its folder under src/, or its file name.
fn component(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("non-empty");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// The code of a file: all of it but its unit tests (a tests.rs, or a
/// file in a folder of a module's tests, holds only tests).
fn code(file: &Path) -> String {
    let tests = file.file_name().is_some_and(|n| n == "tests.rs")
        || file
            .parent()
            .is_some_and(|d| d.file_name().is_some_and(|n| n == "tests"));
    if tests {
        return String::new();
    }
    without_inline_tests(&fs::read_to_string(file).expect("read source"))
}

/// `text` without its inline `#[cfg(test)] mod tests { ... }`: from that
/// attribute to the `}` that closes the module in column 0 (rustfmt's
/// layout). A `mod tests;` declaration is code like any other: the file
/// goes on after it.
fn without_inline_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && w[1] == "mod tests {");
    let end = start.and_then(|s| lines[s..].iter().position(|l| *l == "}").map(|e| s + e));
    let kept: Vec<&str> = match (start, end) {
        (Some(s), Some(e)) => lines[..s].iter().chain(&lines[e + 1..]).copied().collect(),
        _ => lines,
    };
    kept.join("\n")
}

/// The components a piece of code names as `crate::<component>`.
fn imports(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .map(|(i, m)| {
            code[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

fn all_sources() -> (PathBuf, Vec<PathBuf>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    (src, files)
}

#[test]
fn components_import_each_other_in_one_direction_only() {
    let (src, files) = all_sources();
    let mut wrong = Vec::new();
    for file in &files {
        let from = component(&src, file);
        if from == "lib" {
            continue;
        }
        let placed = ALLOWED.iter().find(|(c, _)| *c == from).map(|(_, a)| *a);
        let allowed: &[&str] = match placed {
            Some(a) => a,
            None if SHARED.contains(&from.as_str()) => &[],
            None => panic!(
                "{}: a component docs/architecture.md does not place",
                file.display()
            ),
        };
        for to in imports(&code(file)) {
            let ok = to == from || SHARED.contains(&to.as_str()) || allowed.contains(&to.as_str());
            if !ok {
                wrong.push(format!("{} ({from}) imports {to}", file.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the data path:\n{}",
        wrong.join("\n")
    );
}

/// A module's path in its crate, from its file: `a/b.rs` and `a/b/mod.rs`
/// are `a::b`; `lib.rs` and `main.rs` are the root.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The modules `code`, in module `at`, names by path (`crate::a::b`,
/// `super::c`), each cut to the longest prefix in `known`. Its own
/// ancestors are left out: a module using its parent's items is the
/// parent's part, not a second component.
fn module_imports(
    code: &str,
    at: &[String],
    known: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    // Comments name modules without importing them.
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", at[..at.len().saturating_sub(1)].to_vec()),
    ] {
        for (i, m) in code.match_indices(prefix) {
            if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest: String = code[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut path = base.clone();
            path.extend(
                rest.split("::")
                    .filter(|p| !p.is_empty())
                    .map(str::to_string),
            );
            while !path.is_empty() && !known.contains(&path) {
                path.pop();
            }
            if !at.starts_with(&path) {
                found.insert(path);
            }
        }
    }
    found
}

/// Each module of a crate (`a::b`) and the modules it imports.
type Graph = Vec<(String, BTreeSet<String>)>;

/// The circles in an import graph: each strongly connected set of more
/// than one module, as its members' names.
fn circles(graph: &[(String, BTreeSet<String>)]) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for (_, to) in graph.iter().filter(|(n, _)| *n == m) {
                for t in to {
                    if seen.insert(t.clone()) {
                        todo.push(t.clone());
                    }
                }
            }
        }
        seen
    };
    let reached: Vec<(String, BTreeSet<String>)> =
        graph.iter().map(|(n, _)| (n.clone(), reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (n, r) in &reached {
        if !r.contains(n) || out.iter().any(|c| c.contains(n)) {
            continue;
        }
        let set: Vec<String> = reached
            .iter()
            .filter(|(m, rm)| r.contains(m) && rm.contains(n))
            .map(|(m, _)| m.clone())
            .collect();
        out.push(set);
    }
    out
}

/// The folders of the workspace's other crates, each in its group:
/// crates/<ships|serves|tests>/<crate>.
fn crate_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = Vec::new();
    for group in fs::read_dir(root.join("crates")).expect("read crates") {
        let group = group.expect("dir entry").path();
        if !group.is_dir() {
            continue;
        }
        for krate in fs::read_dir(&group).expect("read a crate group") {
            let dir = krate.expect("dir entry").path();
            if dir.join("Cargo.toml").is_file() {
                dirs.push(dir);
            }
        }
    }
    dirs.sort();
    dirs
}

/// The paths in the workspace's `members`, but the root.
fn workspace_members() -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let text = fs::read_to_string(manifest).expect("read Cargo.toml");
    let list = text
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("workspace members")
        .0;
    let mut members: Vec<String> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty() && m != ".")
        .collect();
    members.sort();
    members
}

/// Every crate's module graph (the provider's and each crate's `src/`).
fn module_graphs() -> Vec<(PathBuf, Graph)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut roots = vec![root.join("src")];
    roots.extend(crate_dirs().into_iter().map(|dir| dir.join("src")));
    roots.sort();
    roots
        .into_iter()
        .map(|src| {
            let mut files = Vec::new();
            sources(&src, &mut files);
            // Programs in src/bin are crates of their own.
            files.retain(|f| !f.strip_prefix(&src).expect("under src").starts_with("bin"));
            let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
            let graph = files
                .iter()
                .map(|f| {
                    let at = module_path(&src, f);
                    let to = module_imports(&code(f), &at, &known)
                        .into_iter()
                        .map(|p| p.join("::"))
                        .collect();
                    (at.join("::"), to)
                })
                .collect();
            (src, graph)
        })
        .collect()
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let found: Vec<String> = module_graphs()
        .into_iter()
        .flat_map(|(src, graph)| {
            circles(&graph)
                .into_iter()
                .map(move |c| format!("{}: {}", src.display(), c.join(" ↔ ")))
        })
        .collect();
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_checks_see_what_they_check() {
    // A file whose imports were not read would pass the first test.
    let (src, files) = all_sources();
    let engine = files
        .iter()
        .find(|f| f.ends_with("engine/mod.rs"))
        .expect("engine/mod.rs");
    let seen = imports(&code(engine));
    assert!(
        seen.contains("discovery") && seen.contains("local"),
        "{seen:?}"
    );
    assert_eq!(component(&src, engine), "engine");
    assert!(files.len() > 30, "{} source files", files.len());

    // A file with its tests in a file of their own is counted whole, past
    // its `mod tests;` line (discovery/wire/mod.rs declares it near the top).
    let wire = files
        .iter()
        .find(|f| f.ends_with("discovery/wire/mod.rs"))
        .expect("discovery/wire/mod.rs");
    let whole = fs::read_to_string(wire)
        .expect("read source")
        .lines()
        .count();
    assert_eq!(code(wire).lines().count(), whole);

    // An inline test module is left out, and only it: its imports are
    // the tests'.
    let module = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nfn g() {}\n";
    let counted = without_inline_tests(module);
    assert!(counted.ends_with("fn g() {}") && !counted.contains("crate::b"));
    // A walk at the wrong depth would find no crate and check nothing, and
    // a crate the walk misses would go unchecked: the walk finds exactly
    // the workspace's members.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found: Vec<String> = crate_dirs()
        .iter()
        .map(|d| {
            d.strip_prefix(root)
                .expect("under the root")
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(found, workspace_members());
    assert_eq!(found.len(), 7, "{found:?}");
    assert_eq!(module_graphs().len(), 1 + found.len());
}

#[test]
fn the_circle_check_sees_circles() {
    // A circle is found through `super::` and `crate::` paths, and a
    // child naming its parent is not one.
    let known: BTreeSet<Vec<String>> = [
        vec![],
        vec!["rt".to_string()],
        vec!["rt".into(), "a".into()],
        vec!["rt".into(), "b".into()],
    ]
    .into_iter()
    .collect();
    let a = vec!["rt".to_string(), "a".to_string()];
    let b = vec!["rt".to_string(), "b".to_string()];
    let from_a = module_imports("use super::{lock, b::run};\nuse super::b::x;", &a, &known);
    let from_b = module_imports("fn f() { crate::rt::a::g(); super::lock(); }", &b, &known);
    assert_eq!(from_a, [b.clone()].into_iter().collect());
    assert_eq!(from_b, [a.clone()].into_iter().collect());
    let graph = vec![
        (
            "rt".to_string(),
            ["rt::a".to_string(), "rt::b".to_string()]
                .into_iter()
                .collect(),
        ),
        (
            "rt::a".to_string(),
            ["rt::b".to_string()].into_iter().collect(),
        ),
        (
            "rt::b".to_string(),
            ["rt::a".to_string()].into_iter().collect(),
        ),
    ];
    assert_eq!(
        circles(&graph),
        [vec!["rt::a".to_string(), "rt::b".to_string()]]
    );
    assert!(circles(&graph[..2]).is_empty());
    let provider = module_graphs()
        .into_iter()
        .find(|(src, _)| src == &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
        .expect("the provider's graph");
    let worker = provider
        .1
        .iter()
        .find(|(n, _)| n == "runtime::worker")
        .expect("worker");
    assert!(worker.1.contains("runtime::net"), "{:?}", worker.1);
}
