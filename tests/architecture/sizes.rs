//! The sizes docs/architecture.md promises a newcomer, held over
//! every Rust file of the workspace (src/, benches/, crates/ and tests/):
//! no file, function or type larger than one can hold in mind, and no unit
//! test that reads another module's private fields (a field moved would
//! break a test that tests no field). The limits follow the design: a part
//! that outgrows them is two parts.

use super::sources;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Lines of code a file may have: lines that are not blank and not only a
/// comment, its inline tests included.
const MAX_CODE_LINES: usize = 600;

/// Lines a function may have, from its signature to its closing brace.
const MAX_FN_LINES: usize = 80;

/// Methods a type may have, over all its inherent `impl` blocks in its
/// crate (its tests' included).
const MAX_METHODS: usize = 25;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every Rust file of src/, benches/, crates/ and tests/ (build output
/// aside), as paths relative to the workspace root.
fn every_file() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "benches", "crates", "tests"] {
        sources(&root().join(dir), &mut files);
    }
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .map(|f| {
            f.strip_prefix(root())
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    files.sort();
    files
}

fn read(file: &Path) -> String {
    fs::read_to_string(root().join(file)).expect("read source")
}

/// Lines that are not blank and not only a comment.
fn code_lines(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// The name of the function `line` starts, if it starts one.
fn fn_name(line: &str) -> Option<&str> {
    let mut t = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "unsafe ",
        "async ",
        "extern \"C\" ",
    ] {
        t = t.strip_prefix(prefix).unwrap_or(t);
    }
    let rest = t.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The functions of `text` (rustfmt's layout) longer than
/// [`MAX_FN_LINES`], with their lengths.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        // A declaration (`;` before any body) or a one-line body.
        let opens = lines[i..]
            .iter()
            .map(|l| l.trim_end())
            .find(|l| l.ends_with('{') || l.ends_with(';') || l.ends_with('}'));
        if !opens.is_some_and(|l| l.ends_with('{')) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let close = format!("{}}}", " ".repeat(indent));
        if let Some(j) = lines[i + 1..].iter().position(|l| *l == close) {
            if j + 2 > MAX_FN_LINES {
                out.push((name.to_string(), j + 2));
            }
        }
    }
    out
}

/// The type an `impl` line is for, if it is an inherent one (`impl<T: X>
/// m::Type<T> {`: the last path before `{`).
fn inherent_impl(line: &str) -> Option<String> {
    let rest = line.strip_prefix("impl")?;
    if !line.ends_with('{') || line.contains(" for ") {
        return None;
    }
    let head = rest.trim_end_matches('{').trim();
    let head = match head.strip_prefix('<') {
        Some(_) => head.split_once("> ").map_or(head, |(_, t)| t),
        None => head,
    };
    Some(
        head.rsplit("::")
            .next()
            .unwrap_or(head)
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect(),
    )
}

/// How many methods each type has in the inherent `impl` blocks of `text`
/// (rustfmt's layout: `impl` in column 0, methods in column 4).
fn methods(text: &str) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line == "}" {
            current = None;
        } else if line.starts_with("impl") {
            current = inherent_impl(line);
        } else if let Some(ty) = &current {
            if line.starts_with("    ") && !line.starts_with("     ") && fn_name(line).is_some() {
                match counts.iter_mut().find(|(t, _)| t == ty) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((ty.clone(), 1)),
                }
            }
        }
    }
    counts
}

/// The crate a file belongs to: the nearest folder above it with a
/// Cargo.toml (tests/ and benches/ are the root crate's).
fn crate_of(file: &Path) -> PathBuf {
    let mut dir = root().join(file);
    while dir.pop() {
        if dir.join("Cargo.toml").is_file() {
            return dir.strip_prefix(root()).unwrap_or(&dir).to_path_buf();
        }
    }
    PathBuf::new()
}

/// What is over the limits, as `(key, size)`: `file: N lines of code`,
/// `file: fn name`, `crate: type Name`.
fn over_limits() -> Vec<(String, usize)> {
    let mut over = Vec::new();
    let mut per_type: BTreeMap<(PathBuf, String), usize> = BTreeMap::new();
    for file in every_file() {
        let text = read(&file);
        let n = code_lines(&text);
        if n > MAX_CODE_LINES {
            over.push((format!("{}", file.display()), n));
        }
        for (name, n) in long_functions(&text) {
            over.push((format!("{}: fn {name}", file.display()), n));
        }
        for (ty, n) in methods(&text) {
            *per_type.entry((crate_of(&file), ty)).or_default() += n;
        }
    }
    for ((krate, ty), n) in per_type {
        if n > MAX_METHODS {
            let krate = match krate.as_os_str().is_empty() {
                true => ".".to_string(),
                false => krate.display().to_string(),
            };
            over.push((format!("{krate}: type {ty}"), n));
        }
    }
    over
}

#[test]
fn no_file_function_or_type_is_larger_than_a_newcomer_can_hold() {
    let found: Vec<String> = over_limits()
        .into_iter()
        .map(|(key, n)| format!("{key}: {n}"))
        .collect();
    assert!(
        found.is_empty(),
        "over {MAX_CODE_LINES} lines of code a file, {MAX_FN_LINES} lines a function or \
         {MAX_METHODS} methods a type:\n{}",
        found.join("\n")
    );
}

/// Whether `file` holds only unit tests: a `tests.rs`, or a file in a
/// module's `tests` folder, under a `src/`.
fn test_file(file: &Path) -> bool {
    let in_src = file.components().any(|c| c.as_os_str() == "src");
    let named = file.file_name().is_some_and(|n| n == "tests.rs")
        || file
            .parent()
            .is_some_and(|d| d.file_name().is_some_and(|n| n == "tests"));
    in_src && named
}

/// The inline `#[cfg(test)] mod NAME {` modules of `text`, to the `}`
/// closing them in column 0.
fn inline_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let opens = lines[i] == "#[cfg(test)]"
            && lines[i + 1].starts_with("mod ")
            && lines[i + 1].ends_with('{');
        if !opens {
            i += 1;
            continue;
        }
        let end = lines[i..]
            .iter()
            .position(|l| *l == "}")
            .map_or(lines.len(), |e| i + e);
        for l in &lines[i..end] {
            out.push_str(l);
            out.push('\n');
        }
        i = end + 1;
    }
    out
}

/// The fields of the column-0 structs of `text`: (name, is it private).
fn fields(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("}") {
            inside = false;
        } else if !line.starts_with(' ') && line.contains("struct ") && line.ends_with('{') {
            inside = true;
        } else if inside && line.starts_with("    ") && !line.starts_with("     ") {
            let t = line.trim();
            let private = !t.starts_with("pub");
            let t = t
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ");
            let t = t.trim_start_matches("pub ");
            if let Some((name, _)) = t.split_once(':') {
                if name.chars().all(|c| c.is_alphanumeric() || c == '_') && !name.is_empty() {
                    out.push((name.to_string(), private));
                }
            }
        }
    }
    out
}

/// `code` without its string and char literals and line comments, which
/// name fields without reading them.
fn without_literals(code: &str) -> String {
    let mut out = String::new();
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '/' if chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The field names `code` reads as `receiver.name` (not a call, not a
/// tuple index, not a range `a..b`).
fn reads(code: &str) -> BTreeSet<String> {
    let code = without_literals(code);
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices('.') {
        let before = code[..i].chars().next_back();
        let receiver =
            before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ')' || c == ']');
        let rest = &code[i + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        let called = after.starts_with('(') || after.starts_with("::");
        let field = !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit());
        if receiver && field && !called {
            out.insert(name);
        }
    }
    out
}

/// Each unit test's read of a private field of a struct that another file
/// defines, in the same crate: `test file reads name (private in file)`.
/// A name that some struct of the crate has as a public field, or that a
/// struct of the test's own file has, is not counted: it cannot be told
/// apart.
fn private_reads() -> Vec<String> {
    let files = every_file();
    let mut private: BTreeMap<(PathBuf, String), Vec<PathBuf>> = BTreeMap::new();
    let mut public: BTreeSet<(PathBuf, String)> = BTreeSet::new();
    // Test fixtures' fields are the tests' own.
    let code = files
        .iter()
        .filter(|f| !test_file(f) && !f.starts_with("tests"));
    for f in code {
        let krate = crate_of(f);
        for (name, is_private) in fields(&read(f)) {
            match is_private {
                true => private
                    .entry((krate.clone(), name))
                    .or_default()
                    .push(f.clone()),
                false => {
                    public.insert((krate.clone(), name));
                }
            }
        }
    }
    let mut found = Vec::new();
    for f in &files {
        let text = read(f);
        let tests = match test_file(f) {
            true => text.clone(),
            false => inline_tests(&text),
        };
        let krate = crate_of(f);
        let own: BTreeSet<String> = fields(&text).into_iter().map(|(n, _)| n).collect();
        for name in reads(&tests) {
            let key = (krate.clone(), name.clone());
            let Some(defined) = private.get(&key) else {
                continue;
            };
            if public.contains(&key) || own.contains(&name) || defined.contains(f) {
                continue;
            }
            let at: Vec<String> = defined.iter().map(|d| d.display().to_string()).collect();
            found.push(format!(
                "{} reads .{name} (private in {})",
                f.display(),
                at.join(", ")
            ));
        }
    }
    found
}

#[test]
fn no_unit_test_reads_another_modules_private_fields() {
    let found = private_reads();
    assert!(
        found.is_empty(),
        "tests reading private fields (go through the owner's interface):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_measures_see_what_they_measure() {
    // Every part of the workspace is measured: the provider, its tests,
    // the benches and every crate.
    let all = every_file();
    for f in [
        "src/engine/mod.rs",
        "tests/e2e/main.rs",
        "tests/architecture/sizes.rs",
        "benches/daemon/main.rs",
        "crates/tests/urdma-dst/src/sim/mod.rs",
        "crates/ships/urdma-acm/src/main.rs",
    ] {
        assert!(all.iter().any(|p| p == Path::new(f)), "{f} not measured");
    }
    assert_eq!(crate_of(Path::new("tests/e2e.rs")), PathBuf::new());
    let dst = crate_of(Path::new("crates/tests/urdma-dst/src/sim/mod.rs"));
    assert_eq!(dst, Path::new("crates/tests/urdma-dst"));

    // Code lines: blank lines and comments are not code.
    assert_eq!(
        code_lines("fn f() {}\n\n   // why\n/// doc\nlet x = 1; // note\n"),
        2
    );

    // A long function, a type's methods over its blocks.
    let body = "    x();\n".repeat(MAX_FN_LINES);
    let long =
        format!("impl<T: A> m::Big<T> {{\n    pub fn f() {{\n{body}    }}\n    fn g() {{}}\n}}\n");
    assert_eq!(long_functions(&long), [("f".to_string(), MAX_FN_LINES + 2)]);
    assert_eq!(methods(&long), [("Big".to_string(), 2)]);
    assert!(methods("impl Display for Big {\n    fn fmt() {}\n}\n").is_empty());
    assert!(long_functions("    fn decl(\n        a: u8,\n    ) -> u8;\n    }\n").is_empty());

    // Private fields and the reads of them.
    let s = "pub struct S {\n    secret: u8,\n    pub open: u8,\n    pub(crate) near: u8,\n}\n";
    assert_eq!(
        fields(s),
        [
            ("secret".to_string(), true),
            ("open".to_string(), false),
            ("near".to_string(), false)
        ]
    );
    let r =
        reads("let a = d.inflight.len(); d.go(); t.0; x.y::<u8>; s.out; 0..n; \"a.cfg\" // b.c");
    assert_eq!(r.into_iter().collect::<Vec<_>>(), ["inflight", "out"]);
    let t = "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn t() { d.inflight; }\n}\nfn g() {}\n";
    assert!(inline_tests(t).contains("d.inflight") && !inline_tests(t).contains("fn g"));
    assert!(test_file(Path::new("src/discovery/tests/trust.rs")));
    assert!(test_file(Path::new("src/engine/tests.rs")));
    assert!(!test_file(Path::new("tests/e2e.rs")));
}
