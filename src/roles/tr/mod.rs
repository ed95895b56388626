//! TR: the tool runner. Turns a proposal into a change set with our own parser, checks it
//! whole against the scope rules, computes every resulting file in memory, and only then
//! writes — all or nothing.

pub mod apply;
pub mod detect;
pub mod dialects;
pub mod diff;
pub mod ladder;
pub mod protect;
pub mod scope;
pub mod weakened;

use crate::identity::sha256_hex;
use crate::roles::change::{Change, Dialect, WriteSpec};
use crate::store::records::{Stage, Weakening};
use apply::{ApplyMethod, FileOutcome, FileState};
use std::path::Path;

/// A change ready to be written: every path's before and after state.
#[derive(Debug, Clone)]
pub struct Plan {
    pub outcomes: Vec<FileOutcome>,
    pub method: ApplyMethod,
    pub touched: Vec<String>,
    /// The pass each file was placed by (diffs only).
    pub methods: Vec<(String, ApplyMethod)>,
    /// Edits that weaken tests, allowed by the work order (SPEC §3.9).
    pub weakening: Vec<Weakening>,
}

impl Plan {
    /// Identity of the change's result, to recognise a proposal that repeats an earlier one.
    pub fn fingerprint(&self) -> String {
        let mut input = Vec::new();
        for o in &self.outcomes {
            input.extend_from_slice(o.path.as_bytes());
            input.push(0);
            match &o.after {
                None => input.extend_from_slice(b"-"),
                Some(s) => {
                    input.extend_from_slice(if s.executable { b"x" } else { b"f" });
                    input.extend_from_slice(sha256_hex(&s.bytes).as_bytes());
                }
            }
            input.push(0);
        }
        sha256_hex(&input)
    }
}

/// Why TR refused a proposal; nothing was written.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub stage: Stage,
    pub message: String,
    pub touched: Vec<String>,
    /// What weakened tests, when that is why (stage `tests_weakened`).
    pub weakening: Vec<Weakening>,
}

fn refusal(stage: Stage, message: impl Into<String>, touched: Vec<String>) -> Refusal {
    Refusal {
        stage,
        message: message.into(),
        touched,
        weakening: Vec::new(),
    }
}

/// What TR does with edits that weaken tests (SPEC §3.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestsGuard {
    /// Not looked for: the `patch` plumbing applies what it is given.
    Off,
    /// The attempt fails with stage `tests_weakened`.
    Refuse,
    /// `tests_may_change`: allowed, and listed in the plan.
    Allow,
}

/// Refuses a change that weakens tests when the guard says so; else the edits to list.
fn guard_tests(
    guard: TestsGuard,
    find: impl FnOnce() -> Vec<Weakening>,
    touched: &[String],
) -> Result<Vec<Weakening>, Refusal> {
    if guard == TestsGuard::Off {
        return Ok(Vec::new());
    }
    let found = find();
    if found.is_empty() || guard == TestsGuard::Allow {
        return Ok(found);
    }
    let mut message = String::from(
        "the proposal weakens tests, which this work order does not allow (tests_may_change is not set):\n",
    );
    for w in &found {
        message.push_str(&format!("  {w}\n"));
    }
    message.push_str(
        "Nothing was applied. Make the tests pass by changing the code they test: do not skip, mark as expected to fail, delete or loosen a test, and do not change test configuration.",
    );
    Err(Refusal {
        weakening: found,
        ..refusal(Stage::TestsWeakened, message, touched.to_vec())
    })
}

/// Options that shape how TR reads and applies a change.
pub struct Rules<'a> {
    /// The allow-list; `None` for the `patch` plumbing, which only has the always-refused rules.
    pub allowed: Option<&'a [String]>,
    /// Paths refused even when allowed (SPEC §3.5); `None` for the `patch` plumbing.
    pub protected: Option<&'a protect::Protected>,
    pub strip: diff::Strip,
    pub strict_only: bool,
    /// The repository of `root`, already open (its index read once per run, not per
    /// proposal); `None` opens it.
    pub repo: Option<&'a git2::Repository>,
    pub tests: TestsGuard,
    /// The files holding tests the baseline's report judged (SPEC §3.9): any change to one is
    /// a weakening; empty without a baseline report.
    pub judged: &'a weakened::Judged,
}

/// Validates and plans a change against the work tree at `root`, writing nothing.
pub fn plan(change: &Change, root: &Path, rules: &Rules<'_>) -> Result<Plan, Refusal> {
    match change {
        Change::Diff(text) if text.iter().all(u8::is_ascii_whitespace) => Ok(Plan {
            outcomes: Vec::new(),
            method: ApplyMethod::Strict,
            touched: Vec::new(),
            methods: Vec::new(),
            weakening: Vec::new(),
        }),
        Change::Diff(text) => plan_diff(text, Dialect::Unified, root, rules),
        Change::Dialect(dialect, text) => plan_diff(text, *dialect, root, rules),
        Change::Writes(writes) => plan_writes(writes, root, rules),
    }
}

/// The passes in order, each with the method it records; `--strict-apply` keeps the first.
fn passes(strict_only: bool) -> &'static [(ApplyMethod, apply::HunkApplier)] {
    const ALL: [(ApplyMethod, apply::HunkApplier); 3] = [
        (ApplyMethod::Strict, apply::apply_strict),
        (ApplyMethod::Recount, ladder::recount),
        (ApplyMethod::Fuzzy, ladder::fuzzy),
    ];
    if strict_only {
        &ALL[..1]
    } else {
        &ALL
    }
}

/// A section that modifies a path absent from the work tree, with nothing on the old side of
/// any hunk: in effect, a new file.
fn creates_from_empty(patch: &diff::FilePatch, root: &Path) -> bool {
    !patch.is_new
        && !patch.is_deleted
        && !patch.is_rename
        && !patch.is_copy
        && patch.old_path.is_some()
        && patch.old_path == patch.new_path
        && !patch.hunks.is_empty()
        && patch.hunks.iter().all(|h| h.old_lines().next().is_none())
        && patch
            .old_path
            .as_deref()
            .is_some_and(|p| matches!(apply::read_state(root, p), Ok(None)))
}

/// Parses a proposal's text in its dialect into file sections.
pub fn parse_sections(
    text: &[u8],
    dialect: Dialect,
    strip: diff::Strip,
) -> Result<Vec<diff::FilePatch>, diff::ParseError> {
    match dialect {
        Dialect::Unified => diff::parse(text, strip),
        Dialect::Envelope => dialects::parse_envelope(text),
        Dialect::SearchReplace => dialects::parse_search_replace(text),
    }
}

fn plan_diff(
    text: &[u8],
    dialect: Dialect,
    root: &Path,
    rules: &Rules<'_>,
) -> Result<Plan, Refusal> {
    let mut patches = parse_sections(text, dialect, rules.strip).map_err(|e| {
        let stage = if e.disagree {
            Stage::PatchScopeViolation
        } else {
            Stage::PatchApplyFailed
        };
        refusal(stage, format!("malformed diff: {e}"), Vec::new())
    })?;
    if patches.is_empty() {
        return Err(refusal(
            Stage::PatchApplyFailed,
            "the diff has no file sections",
            Vec::new(),
        ));
    }
    // Listed before the check, which normalises (and so takes) the paths it reads: a refused
    // record names every path the proposal touched, not only those checked before the refusal.
    let listed = sorted_unique(patches.iter().flat_map(|p| p.touched_paths()));
    let touched = scope::check_patches(
        &mut patches,
        rules.allowed,
        rules.protected,
        root,
        rules.repo,
    )
    .map_err(|v| {
        refusal(
            Stage::PatchScopeViolation,
            format!("scope violation: {v}"),
            listed,
        )
    })?;
    // After scope, before anything is placed: a weakened test fails the attempt whether or not
    // its hunks would apply.
    let weakening = guard_tests(
        rules.tests,
        || {
            let mut found = weakened::in_patches(&patches, root);
            found.extend(weakened::in_judged(&touched, rules.judged, root));
            found
        },
        &touched,
    )?;
    // Each file gets the strictest pass that places all its hunks; the change set records the
    // weakest one used. Nothing is written until every file has its result.
    let mut outcomes = Vec::new();
    let mut method = ApplyMethod::Strict;
    let mut methods = Vec::new();
    let mut sources = apply::Sources::default();
    for patch in &patches {
        let mut errors: Vec<String> = Vec::new();
        let mut placed = None;
        for (m, applier) in passes(rules.strict_only) {
            // The recount pass reads a "modification" of a missing file from an empty
            // pre-image (`--- a/X`, `@@ -0,0 +1,N @@`) as the creation of X (SPEC §3.6).
            let creation;
            let section = if *m != ApplyMethod::Strict && creates_from_empty(patch, root) {
                creation = diff::FilePatch {
                    old_path: None,
                    is_new: true,
                    ..patch.clone()
                };
                &creation
            } else {
                patch
            };
            match apply::plan_patches(root, std::slice::from_ref(section), *applier, &mut sources) {
                Ok(o) => {
                    placed = Some((o, *m));
                    break;
                }
                Err(e) => {
                    errors.push(format!("{}: {}", m.as_str(), e.message));
                    if !e.retry {
                        break;
                    }
                }
            }
        }
        match placed {
            Some((o, m)) => {
                method = method.max(m);
                methods.push((patch.target().to_string(), m));
                outcomes.extend(o);
            }
            None => {
                let last = errors.pop().unwrap_or_default();
                let mut message = last;
                if let Some(first) = errors.first() {
                    message.push_str(&format!("\n(also tried {first})"));
                }
                return Err(refusal(Stage::PatchApplyFailed, message, touched));
            }
        }
    }
    outcomes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Plan {
        outcomes,
        method,
        touched,
        methods,
        weakening,
    })
}

/// Paths as given, sorted and without repeats: what a refused record lists.
fn sorted_unique<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = paths.map(str::to_string).collect();
    out.sort();
    out.dedup();
    out
}

fn plan_writes(writes: &[WriteSpec], root: &Path, rules: &Rules<'_>) -> Result<Plan, Refusal> {
    let mut outcomes: Vec<FileOutcome> = Vec::new();
    let mut touched: Vec<String> = Vec::new();
    let listed = sorted_unique(writes.iter().map(|w| w.path.as_str()));
    for w in writes {
        let path = scope::check_path(&w.path, rules.allowed, rules.protected, root)
            .and_then(|p| {
                scope::check_repo_rules(std::slice::from_ref(&p), root, rules.repo).map(|()| p)
            })
            .map_err(|v| {
                refusal(
                    Stage::PatchScopeViolation,
                    format!("scope violation: {v}"),
                    listed.clone(),
                )
            })?;
        if touched.contains(&path) {
            return Err(refusal(
                Stage::PatchScopeViolation,
                format!("scope violation: {path}: written twice in one proposal"),
                listed,
            ));
        }
        let before = apply::read_state(root, &path).map_err(|e| {
            refusal(
                Stage::PatchApplyFailed,
                format!("{path}: {e}"),
                listed.clone(),
            )
        })?;
        let actual = before.as_ref().map(|s| sha256_hex(&s.bytes));
        if actual != w.base_sha256 {
            let said = w
                .base_sha256
                .as_deref()
                .unwrap_or("null (file must not exist)");
            let is = actual.as_deref().unwrap_or("absent");
            return Err(refusal(
                Stage::PatchApplyFailed,
                format!("{path}: base_sha256 is {said} but the file's current sha256 is {is}"),
                listed,
            ));
        }
        let executable = w
            .executable
            .unwrap_or_else(|| before.as_ref().is_some_and(|s| s.executable));
        touched.push(path.clone());
        outcomes.push(FileOutcome {
            path,
            before,
            after: Some(FileState {
                bytes: w.content.clone().into_bytes(),
                executable,
            }),
        });
    }
    outcomes.sort_by(|a, b| a.path.cmp(&b.path));
    touched.sort();
    let weakening = guard_tests(
        rules.tests,
        || {
            let mut found = weakened::in_writes(&outcomes);
            found.extend(weakened::in_judged(&touched, rules.judged, root));
            found
        },
        &touched,
    )?;
    Ok(Plan {
        outcomes,
        method: ApplyMethod::Writes,
        touched,
        methods: Vec::new(),
        weakening,
    })
}
