//! Files of test configuration (SPEC §3.9): whether one change to them hides tests cannot be
//! decided by reading it (`addopts = -k "not red"`, a `conftest.py` hook that deselects, a
//! `harness = false`), so any change is named. Files that configure other things too
//! (`pyproject.toml`, `setup.cfg`, `Cargo.toml`) count only in their test sections and keys.

use super::{finding, starts, Baseline, FileChange, Kind, View};
use crate::roles::tr::diff::show;
use crate::store::records::Weakening;
use bstr::ByteSlice;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConfigKind {
    /// Wholly test configuration: `conftest.py`, `pytest.ini`, `tox.ini`, Jest, Mocha, Vitest.
    Whole,
    Pyproject,
    SetupCfg,
    Cargo,
}

pub(super) fn kind_of(path: &str) -> Option<ConfigKind> {
    let name = super::lang::file_name(path);
    Some(match name {
        // pytest 9 reads `pytest.toml` and `.pytest.toml` as it reads `pytest.ini`.
        "conftest.py" | "pytest.ini" | ".pytest.ini" | "pytest.toml" | ".pytest.toml"
        | "tox.ini" => ConfigKind::Whole,
        "pyproject.toml" => ConfigKind::Pyproject,
        "setup.cfg" => ConfigKind::SetupCfg,
        "Cargo.toml" => ConfigKind::Cargo,
        n if [
            "jest.config.",
            ".mocharc",
            "vitest.config.",
            "vitest.workspace.",
        ]
        .iter()
        .any(|p| n.starts_with(p)) =>
        {
            ConfigKind::Whole
        }
        _ => return None,
    })
}

/// Names the change to a configuration file, if it touches what decides which tests run.
pub(super) fn check(
    path: &str,
    kind: ConfigKind,
    change: &FileChange<'_>,
    base: &mut Baseline<'_>,
    out: &mut Vec<Weakening>,
) {
    if kind == ConfigKind::Whole {
        whole(path, change, out);
        return;
    }
    let lines = base.lines();
    // A deletion by name carries no lines: its lines are the baseline's.
    let deleted;
    let views: &[View<'_>] = if change.views.is_empty() && change.deleted {
        deleted = [View {
            lines: lines.iter().map(|l| (Kind::Remove, *l)).collect(),
            old_start: Some(1),
            new_start: Some(1),
        }];
        &deleted
    } else {
        &change.views
    };
    let starts = starts(views, &lines);
    let mut named: Vec<Vec<u8>> = Vec::new();
    for (view, (old_start, new_start)) in views.iter().zip(&starts) {
        // The section the hunk starts in: the last header above it in the baseline.
        let above = old_start
            .map(|s| s.saturating_sub(1).min(lines.len()))
            .unwrap_or(0);
        let from = lines[..above]
            .iter()
            .rposition(|l| header(l.trim_ascii()).is_some());
        let inherited = from
            .and_then(|i| header(lines[i].trim_ascii()))
            .unwrap_or_default();
        // The key whose (multi-line) value the hunk starts in.
        let mut value = Vec::new();
        for l in &lines[from.unwrap_or(0)..above] {
            toml_paths(l.trim_ascii(), inherited, &mut value);
        }
        let mut section = [inherited, inherited];
        let mut value = [value.clone(), value];
        let (mut old, mut new) = (0, 0);
        for (k, raw) in &view.lines {
            let t = raw.trim_ascii();
            let hit = match k {
                Kind::Context => {
                    if let Some(h) = header(t) {
                        section = [h, h];
                        value = [Vec::new(), Vec::new()];
                    }
                    for side in 0..2 {
                        toml_paths(t, section[side], &mut value[side]);
                    }
                    // A header added or removed above moves this line to another section.
                    section[0] != section[1]
                        && !quiet(t)
                        && (test_section(kind, section[0]) || test_section(kind, section[1]))
                }
                Kind::Remove | Kind::Add => {
                    let side = usize::from(*k == Kind::Add);
                    if let Some(h) = header(t) {
                        section[side] = h;
                        value[side] = Vec::new();
                    }
                    let paths = toml_paths(t, section[side], &mut value[side]);
                    !quiet(t)
                        && (test_section(kind, section[side])
                            || (kind == ConfigKind::Pyproject
                                && paths.iter().any(|p| test_section(kind, p)))
                            || (kind == ConfigKind::Cargo && cargo_test_key(t)))
                }
            };
            if hit {
                let side = usize::from(*k == Kind::Add);
                let sec = section[side];
                if !named.iter().any(|n| n == sec) {
                    named.push(sec.to_vec());
                    let line = if *k == Kind::Add {
                        new_start.map(|s| s + new)
                    } else {
                        old_start.map(|s| s + old)
                    };
                    let what = if sec.is_empty() {
                        format!("changes test configuration: {}", show(t))
                    } else {
                        format!(
                            "changes the test configuration in [{}]: {}",
                            sec.to_str_lossy(),
                            show(t)
                        )
                    };
                    out.push(finding(path, line, what));
                }
            }
            match k {
                Kind::Context => {
                    old += 1;
                    new += 1;
                }
                Kind::Remove => old += 1,
                Kind::Add => new += 1,
            }
        }
    }
}

/// Any change to a file that is wholly test configuration.
fn whole(path: &str, change: &FileChange<'_>, out: &mut Vec<Weakening>) {
    let first = change.views.iter().find_map(|v| {
        let (mut old, mut new) = (0, 0);
        for (k, _) in &v.lines {
            match k {
                Kind::Remove => return Some(v.old_start.map(|s| s + old)),
                Kind::Add => return Some(v.new_start.map(|s| s + new)),
                Kind::Context => {
                    old += 1;
                    new += 1;
                }
            }
        }
        None
    });
    let what = if change.created {
        "creates".to_string()
    } else if change.deleted {
        "deletes".to_string()
    } else if let Some(to) = change.renamed_to {
        format!("moves to {to}")
    } else if first.is_some() {
        "changes".to_string()
    } else {
        return;
    };
    out.push(finding(
        path,
        first.flatten(),
        format!("{what} a file of test configuration (any change to it can hide tests)"),
    ));
}

/// Blank and comment lines change nothing a runner reads.
fn quiet(t: &[u8]) -> bool {
    t.is_empty() || t.starts_with(b"#") || t.starts_with(b";")
}

/// The name of a `[section]` or `[[array]]` header line.
fn header(t: &[u8]) -> Option<&[u8]> {
    let inner = t.strip_prefix(b"[")?;
    let inner = inner.strip_prefix(b"[").unwrap_or(inner);
    let end = inner.find_byte(b']')?;
    Some(inner[..end].trim_ascii())
}

fn test_section(kind: ConfigKind, name: &[u8]) -> bool {
    // `[ tool . "pytest" ]` is `[tool.pytest]`.
    let name = &dotted(name)[..];
    let under = |root: &[u8]| {
        name == root
            || name
                .strip_prefix(root)
                .is_some_and(|rest| rest.starts_with(b"."))
    };
    match kind {
        ConfigKind::Pyproject => under(b"tool.pytest") || under(b"tool.tox"),
        ConfigKind::SetupCfg => {
            name == b"tool:pytest"
                || name == b"pytest"
                || name.starts_with(b"tox:")
                || name.starts_with(b"testenv")
        }
        ConfigKind::Cargo => name == b"test",
        ConfigKind::Whole => true,
    }
}

/// `harness`, `autotests` or `test` (`[lib] test = false`, `lib.test = false`,
/// `lib = { test = false }`): keys that decide which Rust tests are built and how they run,
/// wherever they stand.
fn cargo_test_key(t: &[u8]) -> bool {
    assignments(t).iter().any(|(_, key)| {
        let last = key.rsplit(|c| *c == b'.').next().unwrap_or_default();
        matches!(last, b"harness" | b"autotests" | b"test")
    })
}

/// The TOML keys a line sets, as dotted paths below `section`: its own key (`a.b = …`,
/// whose path later lines of a multi-line value keep in `value`), and the keys of the inline
/// tables it holds (`pytest = { addopts = … }` below `[tool]` is `tool.pytest.addopts`).
/// Read so that a test section set by dotted keys or inline tables is still a test section.
fn toml_paths(t: &[u8], section: &[u8], value: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let join = |a: &[u8], b: &[u8]| -> Vec<u8> {
        if a.is_empty() {
            b.to_vec()
        } else {
            [a, b".", b].concat()
        }
    };
    let keys = assignments(t);
    if header(t).is_some() {
        return Vec::new();
    }
    let mut paths = Vec::new();
    let mut outer = value.clone();
    for (depth, key) in keys {
        if depth == 0 {
            *value = join(&dotted(section), &key);
            outer = value.clone();
            paths.push(value.clone());
        } else {
            paths.push(join(&outer, &key));
        }
    }
    if paths.is_empty() && !value.is_empty() {
        paths.push(value.clone());
    }
    paths
}

/// Each `key =` of a line outside strings, with its depth in brackets and braces, the key
/// as a dotted path (quotes and the spaces around dots dropped).
fn assignments(t: &[u8]) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    let (mut quote, mut escaped, mut depth, mut start) = (None::<u8>, false, 0usize, 0usize);
    for (i, &c) in t.iter().enumerate() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == b'\\' && q == b'"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            b'"' | b'\'' => quote = Some(c),
            b'#' => break,
            b'{' | b'[' => {
                depth += 1;
                start = i + 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => start = i + 1,
            b'=' if t.get(i + 1) != Some(&b'=') => {
                let key = t[start.min(i)..i].trim_ascii();
                let bare = |c: &u8| c.is_ascii_alphanumeric() || b"_-.'\" \t".contains(c);
                if !key.is_empty() && key.iter().all(bare) {
                    out.push((depth, dotted(key)));
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// A dotted TOML key or table name as one path: `tool . "pytest"` is `tool.pytest`.
fn dotted(name: &[u8]) -> Vec<u8> {
    let parts: Vec<&[u8]> = name
        .split(|c| *c == b'.')
        .map(|p| {
            let p = p.trim_ascii();
            p.strip_prefix(b"\"")
                .and_then(|q| q.strip_suffix(b"\""))
                .or_else(|| p.strip_prefix(b"'").and_then(|q| q.strip_suffix(b"'")))
                .unwrap_or(p)
        })
        .collect();
    parts.join(&b'.')
}
