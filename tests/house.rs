//! The house rules of `src/`, checked on the source itself: every module
//! imports only from its own floor or the floors below it, no two modules
//! import each other, directly or round a circle, and no file or function
//! grows past what a reader takes in at once (800 lines of code before a
//! file's unit tests, 70 lines a function).
//!
//! Floors from the top: bin → cli → tools → broker → client → coord →
//! protocol → storage → ground (`error`, `limits`, `human`, `clock`,
//! `stop`, `stats`, `sync`, `random`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floor of each top-level module: higher numbers sit higher.
fn floor(top: &str) -> Option<u32> {
    Some(match top {
        "error" | "limits" | "human" | "clock" | "stop" | "stats" | "sync" | "random" => 0,
        "storage" => 1,
        "protocol" => 2,
        "coord" => 3,
        "client" => 4,
        "broker" => 5,
        "tools" => 6,
        "cli" => 7,
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

/// The code of a file without its comments and without its unit tests
/// (which may reach anywhere to set a scene).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b::...` path a piece of code names, and every path
/// inside `use crate::{...}` groups, as lists of segments.
fn crate_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", module[..module.len().saturating_sub(1)].to_vec()),
    ] {
        let mut from = 0;
        while let Some(at) = code[from..].find(prefix) {
            let start = from + at;
            from = start + prefix.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let rest = &code[from..];
            let mut path = base.clone();
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let mut p = path.clone();
                    p.extend(
                        item.trim()
                            .split("::")
                            .map(|s| s.trim().to_string())
                            .filter(|s| !s.is_empty()),
                    );
                    paths.push(p);
                }
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            path.extend(
                rest[..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            paths.push(path);
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
        if module.is_empty() || module[0] == "bin" {
            continue;
        }
        let from_floor =
            floor(&module[0]).unwrap_or_else(|| panic!("{} sits on no floor", module.join("::")));
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for path in crate_paths(&code, &module) {
            let Some(top) = path.first() else { continue };
            let Some(to_floor) = floor(top) else { continue };
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

/// The code of a file before its unit tests, as lines.
fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod tests"))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
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
