//! The house rules of `src/`, checked on the source itself: every module
//! imports only from its own floor or the floors below it, no two modules
//! import each other, directly or round a circle, and no file or function
//! grows past what a reader takes in at once (800 lines of code before a
//! file's unit tests, 70 lines a function).
//!
//! Floors from the top: bin → cli → tools → broker → coord → client →
//! protocol → storage → ground (`error`, `limits`, `human`, `clock`,
//! `stop`, `stats`, `sync`, `random`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floor of each top-level module: higher numbers sit higher.
fn floor(top: &str) -> Option<u32> {
    Some(match top {
        "error" | "limits" | "human" | "clock" | "stop" | "stats" | "sync" | "random" | "diag" => 0,
        "storage" => 1,
        "protocol" => 2,
        "kafka" => 2,
        "net" => 2,
        "client" => 3,
        "coord" => 4,
        "broker" => 5,
        "tools" => 6,
        "cli" => 7,
        "fuzz" => 8,
        _ => return None,
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/storage/fs/mod.rs` and `src/storage/fs.rs` are `storage::fs`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without its comments, string literals and
/// `#[cfg(test)] mod` blocks (unit tests may reach anywhere to set a
/// scene); code after such a block is kept.
fn code_of(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        code.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                // A string literal: its text is not code.
                let mut escaped = false;
                for c in chars.by_ref() {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
                code.push_str("\"\"");
            }
            _ => code.push(c),
        }
    }
    while let Some(at) = code.find("#[cfg(test)]") {
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        let Some(body) = rest.strip_prefix("mod ").and_then(|r| r.find('{')) else {
            // An item other than a module: only the attribute goes.
            code.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        };
        let open = code.len() - rest.len() + "mod ".len() + body;
        let mut depth = 0;
        let mut end = code.len();
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        code.replace_range(at..end, "");
    }
    code
}

/// Parses a path or use tree at the start of `s` (after `crate::` or the
/// `super::`s), adding every full path it names to `out`.
fn use_tree(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    let mut i = 0;
    let bytes = s.as_bytes();
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if bytes.get(i) == Some(&b'{') {
            i += 1;
            loop {
                i += use_tree(&s[i..], &path, out);
                while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b',') {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return i + 1;
                }
            }
        }
        if bytes.get(i) == Some(&b'*') {
            path.push("*".into());
            out.push(path);
            return i + 1;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        path.push(s[start..i].to_string());
        if s[i..].starts_with("::") {
            i += 2;
            continue;
        }
        out.push(path);
        // An alias (`as x`) or anything else ends the path.
        while i < bytes.len() && !matches!(bytes[i], b',' | b'}' | b';') {
            i += 1;
        }
        return i;
    }
}

/// Every path of the crate a piece of code names: `crate::a::b`,
/// `super::super::c` (resolved from `module`), and each path of a use
/// group, nested or not, as lists of segments.
fn crate_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for prefix in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(prefix) {
            let start = from + at;
            from = start + prefix.len();
            let before = start.checked_sub(1).map(|i| bytes[i]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue; // inside a longer path, or a later `super::`
            }
            let mut base = Vec::new();
            if prefix == "super::" {
                let mut ups = 1;
                while code[from..].starts_with("super::") {
                    from += "super::".len();
                    ups += 1;
                }
                base = module[..module.len().saturating_sub(ups)].to_vec();
            }
            use_tree(&code[from..], &base, &mut paths);
        }
    }
    paths
}

#[test]
fn no_module_imports_from_a_higher_floor_and_none_round_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();

    let mut upward = Vec::new();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        if module.is_empty() {
            // The crate root re-exports only from the ground, so that a
            // `crate::Name` never hides a higher floor.
            for line in code
                .lines()
                .filter(|l| l.trim_start().starts_with("pub use "))
            {
                let top = line.trim_start()["pub use ".len()..]
                    .split("::")
                    .next()
                    .unwrap();
                if floor(top) != Some(0) {
                    upward.push(format!(
                        "the crate root re-exports from {top}: {}",
                        line.trim()
                    ));
                }
            }
            continue;
        }
        if module[0] == "bin" {
            continue;
        }
        let from_floor =
            floor(&module[0]).unwrap_or_else(|| panic!("{} sits on no floor", module.join("::")));
        if from_floor > 0 && code.contains("#[macro_export]") {
            // An exported macro lives at the crate root, out of its floor.
            upward.push(format!(
                "{} exports a macro to the crate root",
                module.join("::")
            ));
        }
        for path in crate_paths(&code, &module) {
            let Some(top) = path.first() else { continue };
            let Some(to_floor) = floor(top) else {
                if !matches!(top.as_str(), "Error" | "Result") {
                    upward.push(format!(
                        "{} names crate::{}, on no floor (a glob, a re-export or a macro at the \
                         root hides where it lives)",
                        module.join("::"),
                        path.join("::")
                    ));
                }
                continue;
            };
            if to_floor > from_floor {
                upward.push(format!("{} imports {}", module.join("::"), path.join("::")));
            }
            // The longest prefix of the path that is a module.
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p));
            if let Some(target) = target {
                let related = target.starts_with(&module) || module.starts_with(&target);
                if !related {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a higher floor:\n{}",
        upward.join("\n")
    );

    // A circle is a module that reaches itself.
    let mut circles = Vec::new();
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Vec<Vec<String>>> = vec![vec![start.clone()]];
        while let Some(trail) = stack.pop() {
            let last = trail.last().unwrap();
            for next in edges.get(last).into_iter().flatten() {
                if next == start {
                    let names: Vec<String> =
                        trail.iter().chain([next]).map(|m| m.join("::")).collect();
                    circles.push(names.join(" → "));
                } else if seen.insert(next.clone()) {
                    let mut longer = trail.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

/// The lines of a file outside its `#[cfg(test)] mod` blocks.
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut code = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let starts_tests = lines[i].trim() == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|l| l.trim_start().starts_with("mod "));
        if starts_tests {
            let indent = lines[i].len() - lines[i].trim_start().len();
            let close = format!("{}}}", " ".repeat(indent));
            i += lines[i..]
                .iter()
                .position(|l| l.trim_end() == close)
                .unwrap_or(lines.len())
                + 1;
            continue;
        }
        code.push(lines[i]);
        i += 1;
    }
    code
}

/// Every function of some code: (name, first line, lines long), from its
/// `fn` line to the closing brace at the same indentation.
fn functions<'a>(code: &[&'a str]) -> Vec<(&'a str, usize, usize)> {
    let mut found = Vec::new();
    for (i, line) in code.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let header = [
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "fn ",
            "const fn ",
            "pub const fn ",
        ]
        .iter()
        .find_map(|p| trimmed.strip_prefix(p));
        let Some(rest) = header else { continue };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name = rest
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        let close = format!("{}}}", " ".repeat(indent));
        if let Some(len) = code[i..].iter().position(|l| l.trim_end() == close) {
            found.push((name, i + 1, len + 1));
        }
    }
    found
}

#[test]
fn no_file_over_800_lines_of_code_and_no_function_over_70_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut too_long = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let code = code_lines(&text);
        let name = file.strip_prefix(&src).unwrap().display().to_string();
        if code.len() > 800 {
            too_long.push(format!("{name}: {} lines of code", code.len()));
        }
        for (function, line, len) in functions(&code) {
            if len > 70 {
                too_long.push(format!("{name}:{line}: fn {function} is {len} lines"));
            }
        }
    }
    assert!(
        too_long.is_empty(),
        "split these at a concept boundary:\n{}",
        too_long.join("\n")
    );
}
