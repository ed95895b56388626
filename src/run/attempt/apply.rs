//! TR: a proposal scoped, planned in memory and written all or nothing; its tree committed as
//! the attempt's.

use crate::git;
use crate::graph::Outcome;
use crate::roles::se::proposal::Change;
use crate::roles::tr::{self, apply, diff::Strip, Rules};
use crate::run::attempt::session::Session;
use crate::run::files::write_json;
use crate::store::records::Stage;
use serde::Serialize;

#[derive(Serialize)]
pub(crate) struct ApplyResult<'a> {
    pub(crate) ok: bool,
    pub(crate) method: Option<&'a str>,
    pub(crate) touched_files: &'a [String],
    pub(crate) files: Vec<FileAction<'a>>,
    pub(crate) error: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct FileAction<'a> {
    pub(crate) path: &'a str,
    pub(crate) action: &'a str,
}

impl Session<'_> {
    pub(crate) fn apply(&mut self, attempt: u32) -> Outcome {
        let (dir, rel) = {
            let a = self.current();
            (a.dir.clone(), a.rel.clone())
        };
        let Some(proposal) = self.current().proposal.clone() else {
            return self.fail(Stage::Exception, None, "no proposal to apply");
        };
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
            return Outcome::Fatal(Stage::Exception);
        }
        let allowed = self.wo.order.allowed_files.clone();
        let rules = Rules {
            allowed: Some(&allowed),
            protected: Some(&self.protected),
            strip: Strip::Auto,
            strict_only: self.strict_apply,
        };
        let plan = match tr::plan(&proposal.change, &self.root, &rules) {
            Ok(plan) => plan,
            Err(refusal) => {
                let result = ApplyResult {
                    ok: false,
                    method: None,
                    touched_files: &refusal.touched,
                    files: Vec::new(),
                    error: Some(&refusal.message),
                };
                let _ = write_json(&dir.join("apply_result.json"), &result);
                self.current().record.touched_files = refusal.touched.clone();
                return self.fail(refusal.stage, None, &refusal.message);
            }
        };
        let fingerprint = plan.fingerprint();
        if let Some((_, earlier)) = self.seen.iter().find(|(f, _)| *f == fingerprint).cloned() {
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
            return self.fail(stage, None, &text);
        }
        self.seen.push((fingerprint, attempt));
        if let Err(e) = self.journal_stage("apply", Some(&plan.outcomes)) {
            self.fatal = Some(e.message);
            return Outcome::Fatal(Stage::Exception);
        }
        if let Err(e) = apply::write_outcomes(&self.root, &plan.outcomes) {
            return self.fail(
                Stage::PatchApplyFailed,
                None,
                &format!("writing the change failed: {e}"),
            );
        }
        let dialect = matches!(proposal.change, Change::Dialect(..));
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
        };
        let _ = write_json(&dir.join("apply_result.json"), &result);
        let method = plan.method.as_str().to_string();
        let count = plan.outcomes.len();
        let a = self.current();
        a.applied = true;
        a.record.apply_ok = true;
        a.record.apply_method = Some(method.clone());
        a.record.touched_files = plan.touched.clone();
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
