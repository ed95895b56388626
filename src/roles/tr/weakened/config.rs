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
        let inherited = lines[..above]
            .iter()
            .rev()
            .find_map(|l| header(l.trim_ascii()))
            .unwrap_or_default();
        let mut section = [inherited, inherited];
        let (mut old, mut new) = (0, 0);
        for (k, raw) in &view.lines {
            let t = raw.trim_ascii();
            let hit = match k {
                Kind::Context => {
                    if let Some(h) = header(t) {
                        section = [h, h];
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
                    }
                    !quiet(t)
                        && (test_section(kind, section[side])
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

/// `harness`, `autotests` or `test` (`[lib] test = false`): keys that decide which Rust tests
/// are built and how they run, wherever they stand.
fn cargo_test_key(t: &[u8]) -> bool {
    let Some(eq) = t.find_byte(b'=') else {
        return false;
    };
    let key = t[..eq].trim_ascii();
    let key = key
        .strip_prefix(b"\"")
        .and_then(|k| k.strip_suffix(b"\""))
        .unwrap_or(key);
    matches!(key, b"harness" | b"autotests" | b"test")
}
