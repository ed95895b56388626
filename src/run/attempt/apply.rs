//! TR: a proposal scoped, planned in memory and written all or nothing; its tree committed as
//! the attempt's.

use crate::git;
use crate::graph::Outcome;
use crate::roles::se::proposal::{Change, Proposal};
use crate::roles::tr::{self, apply, diff::Strip, Rules, TestsGuard};
use crate::run::artifacts::write_json;
use crate::run::attempt::session::Session;
use crate::store::records::{Stage, Weakening};
use serde::Serialize;
use std::path::Path;

#[derive(Serialize)]
pub(crate) struct ApplyResult<'a> {
    pub(crate) ok: bool,
    pub(crate) method: Option<&'a str>,
    pub(crate) touched_files: &'a [String],
    pub(crate) files: Vec<FileAction<'a>>,
    pub(crate) error: Option<&'a str>,
    /// The backend that confined the agent that proposed (SPEC §7.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sandbox: Option<String>,
    /// Edits that weaken tests (SPEC §3.9): why the attempt failed (`tests_weakened`), or
    /// what `tests_may_change` allowed.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(crate) weakening: &'a [Weakening],
}

#[derive(Serialize)]
pub(crate) struct FileAction<'a> {
    pub(crate) path: &'a str,
    pub(crate) action: &'a str,
}

impl Session<'_> {
    /// TR for one attempt: the proposal stored, scoped and planned in memory, refused when it
    /// repeats an earlier attempt's change, else written all or nothing.
    pub(crate) fn apply(&mut self, attempt: u32) -> Outcome {
        let (dir, rel) = {
            let a = self.current();
            (a.dir.clone(), a.rel.clone())
        };
        let Some(proposal) = self.current().proposal.clone() else {
            return self.fail(Stage::Exception, None, "no proposal to apply");
        };
        if let Some(outcome) = self.store_proposal(&proposal, &dir, &rel) {
            return outcome;
        }
        crate::trace::mark("    TR: proposal stored");
        let plan = match self.scope(&proposal, &dir) {
            Ok(plan) => plan,
            Err(outcome) => return outcome,
        };
        let fingerprint = plan.fingerprint();
        if let Some(outcome) = self.repeated(&plan, &fingerprint) {
            return outcome;
        }
        self.seen.push((fingerprint, attempt));
        crate::trace::mark("    TR: scoped and planned");
        let dialect = matches!(proposal.change, Change::Dialect(..));
        self.write_change(attempt, plan, dialect, &dir)
    }

    /// The proposal as the model gave it, in the attempt's folder.
    fn store_proposal(&mut self, proposal: &Proposal, dir: &Path, rel: &str) -> Option<Outcome> {
        let written = match &proposal.change {
            Change::Diff(text) | Change::Dialect(_, text) => {
                self.current().record.patch_path = format!("{rel}/proposed_patch.diff");
                std::fs::write(dir.join("proposed_patch.diff"), text)
            }
            Change::Writes(writes) => {
                self.current().record.patch_path = format!("{rel}/proposed_writes.json");
                let list: Vec<serde_json::Value> = writes
                    .iter()
                    .map(|w| serde_json::json!({"path": w.path, "base_sha256": w.base_sha256, "content": w.content, "executable": w.executable}))
                    .collect();
                write_json(&dir.join("proposed_writes.json"), &list)
                    .map_err(|e| std::io::Error::other(e.message))
            }
        };
        if let Err(e) = written {
            self.fatal = Some(format!("cannot store the proposal: {e}"));
            return Some(Outcome::Fatal(Stage::Exception));
        }
        None
    }

    /// The change planned in memory within the work order's scope (SPEC §3.5).
    fn scope(&mut self, proposal: &Proposal, dir: &Path) -> Result<tr::Plan, Outcome> {
        let allowed = self.plan.wo.order.allowed_files.clone();
        let judged = self.judged();
        let rules = Rules {
            allowed: Some(&allowed),
            protected: Some(&self.plan.protected),
            strip: Strip::Auto,
            strict_only: self.plan.strict_apply,
            repo: Some(self.repo),
            tests: if self.plan.wo.order.tests_may_change {
                TestsGuard::Allow
            } else {
                TestsGuard::Refuse
            },
            judged: &judged,
        };
        match tr::plan(&proposal.change, &self.root, &rules) {
            Ok(plan) => Ok(plan),
            Err(refusal) => {
                let result = ApplyResult {
                    ok: false,
                    method: None,
                    touched_files: &refusal.touched,
                    files: Vec::new(),
                    error: Some(&refusal.message),
                    sandbox: self.current().agent_sandbox.clone(),
                    weakening: &refusal.weakening,
                };
                let _ = write_json(&dir.join("apply_result.json"), &result);
                self.current().record.touched_files = refusal.touched.clone();
                self.current().record.weakening = refusal.weakening.clone();
                Err(self.fail(refusal.stage, None, &refusal.message))
            }
        }
    }

    /// What the baseline's reports judged (SPEC §3.9): the files pytest's ids name, looked up
    /// in the baseline's tree, and the other runners' test names; nothing without a report.
    fn judged(&self) -> tr::weakened::Judged {
        if self.baseline_tests.is_empty() {
            return tr::weakened::Judged::default();
        }
        let Ok(tree) = self.baseline.tree() else {
            return tr::weakened::Judged::default();
        };
        let is_file = |p: &str| {
            tree.get_path(Path::new(p))
                .is_ok_and(|e| e.kind() == Some(git2::ObjectType::Blob))
        };
        let all = || {
            let mut files = Vec::new();
            let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
                if e.kind() == Some(git2::ObjectType::Blob) {
                    if let Some(name) = e.name() {
                        files.push(format!("{dir}{name}"));
                    }
                }
                git2::TreeWalkResult::Ok
            });
            files
        };
        let files = tr::weakened::judged_files(&self.baseline_tests, is_file, all);
        tr::weakened::Judged::of(&self.baseline_tests, files)
    }

    /// A change an earlier attempt already tried fails again without being applied.
    fn repeated(&mut self, plan: &tr::Plan, fingerprint: &str) -> Option<Outcome> {
        let (_, earlier) = self.seen.iter().find(|(f, _)| f == fingerprint).cloned()?;
        let earlier_record = self
            .summary
            .attempts
            .iter()
            .find(|r| r.attempt_index == earlier)
            .cloned();
        let (stage, text) = match earlier_record.and_then(|r| r.failure_brief) {
            Some(b) => (b.stage, b.primary_error_excerpt),
            None => (Stage::AcceptanceFailed, String::new()),
        };
        let text = format!(
            "you repeated attempt {earlier}'s change exactly; it was not applied again. It failed with:\n{text}"
        );
        let a = self.current();
        a.record.repeat_of = Some(earlier);
        a.record.touched_files = plan.touched.clone();
        Some(self.fail(stage, None, &text))
    }

    /// Writes the planned change into the tree (journaled first, with its pre-images) and
    /// commits the tree it makes as the attempt's.
    fn write_change(&mut self, attempt: u32, plan: tr::Plan, dialect: bool, dir: &Path) -> Outcome {
        if let Err(e) = self.journal_stage("apply", Some(&plan.outcomes)) {
            self.fatal = Some(e.message);
            return Outcome::Fatal(Stage::Exception);
        }
        crate::trace::mark("    TR: journaled");
        if let Err(e) = apply::write_outcomes(&self.root, &plan.outcomes) {
            return self.fail(
                Stage::PatchApplyFailed,
                None,
                &format!("writing the change failed: {e}"),
            );
        }
        let tree =
            git::tree_with(self.repo, self.baseline.tree_id(), &plan.outcomes).and_then(|t| {
                if dialect {
                    // Stored as the unified diff it amounts to (the raw text is in llm_output.txt).
                    let diff = git::diff_trees(self.repo, self.baseline.tree_id(), t)?;
                    std::fs::write(dir.join("proposed_patch.diff"), diff)?;
                }
                let commit = self
                    .writer
                    .attempt_commit(self.repo, &self.baseline, t, attempt)?;
                Ok((t, commit))
            });
        crate::trace::mark("    TR: written, tree and attempt commit");
        let files: Vec<FileAction<'_>> = plan
            .outcomes
            .iter()
            .map(|o| FileAction {
                path: &o.path,
                action: o.action(),
            })
            .collect();
        let result = ApplyResult {
            ok: true,
            method: Some(plan.method.as_str()),
            touched_files: &plan.touched,
            files,
            error: None,
            sandbox: self.current().agent_sandbox.clone(),
            weakening: &plan.weakening,
        };
        let _ = write_json(&dir.join("apply_result.json"), &result);
        let method = plan.method.as_str().to_string();
        let count = plan.outcomes.len();
        let a = self.current();
        a.applied = true;
        a.record.apply_ok = true;
        a.record.apply_method = Some(method.clone());
        a.record.touched_files = plan.touched.clone();
        a.record.weakening = plan.weakening.clone();
        a.plan = Some(plan);
        match tree {
            Ok((tree, commit)) => {
                a.tree = Some(tree);
                a.record.tree_commit = Some(commit.to_string());
            }
            Err(e) => {
                self.fatal = Some(e.message);
                return Outcome::Fatal(Stage::Exception);
            }
        }
        self.ui
            .info(format!("  TR applied {count} file(s) ({method})"));
        Outcome::Ok
    }
}
