//! `git factory attest verify [<rev>…]`: checks the signed evidence that each revision's tree
//! passed the checks the repository requires today (SPEC §6.1), without running them.

use crate::error::{Exit, Result};
use crate::evidence::{self, Finding};
use crate::git;
use crate::ui::{escape_controls, Ui};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

#[derive(Debug, Args)]
pub struct AttestArgs {
    #[command(subcommand)]
    pub action: AttestAction,
}

#[derive(Debug, Subcommand)]
pub enum AttestAction {
    /// Check the signed evidence on each revision's tree (exit 0: every one has an envelope
    /// that verifies; 1: not)
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The revisions whose trees to check
    #[arg(value_name = "REV", default_value = "HEAD")]
    pub revs: Vec<String>,
    /// Print the findings as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

impl AttestArgs {
    /// The repository the action names (`--repo`), if any.
    pub fn repo(&self) -> Option<&std::path::Path> {
        match &self.action {
            AttestAction::Verify(args) => args.repo.as_deref(),
        }
    }
}

pub fn cmd_attest(ui: &Ui, args: AttestArgs) -> Result<Exit> {
    match args.action {
        AttestAction::Verify(args) => verify(ui, args),
    }
}

fn finding_json(f: &Finding) -> Value {
    let mut v = json!({
        "line": f.line,
        "accepted": f.reason.is_none(),
        "reason": f.reason.map(|r| r.as_str()),
        "signer": f.signer,
        "format": f.format.map(|x| x.as_str()),
        "keyid": f.keyid,
        "detail": f.detail,
    });
    if !f.claimed_keyid.is_empty() {
        v["claimed_keyid"] = f.claimed_keyid.clone().into();
    }
    v
}

/// A revision that names no commit: reported with the others (exit 1, as a revision that
/// cannot be vouched for), not a usage error that hides their findings.
fn missing_rev(ui: &Ui, rev: &str, json_out: bool, report: &mut Vec<Value>) {
    let why = format!("{rev} is not a commit");
    if json_out {
        report.push(json!({"rev": rev, "verified": false, "error": why}));
        return;
    }
    ui.always(format!(
        "{} {}: {}\nhint: give a branch, tag or commit id",
        console::style("not attested").red().bold(),
        escape_controls(rev),
        escape_controls(&why)
    ));
}

fn print_findings(ui: &Ui, rev: &str, short: &str, found: &evidence::TreeEvidence) {
    let rev = escape_controls(rev);
    if found.findings.is_empty() && found.not_examined == 0 {
        ui.always(format!(
            "{} {rev} (tree {short}): no signed evidence on this tree\nhint: fetch it (git factory fetch), or attest it where the checks pass (git factory verify --attest)",
            console::style("not attested").red().bold(),
        ));
        return;
    }
    ui.always(format!(
        "{} {rev} (tree {short}): no envelope is accepted",
        console::style("not attested").red().bold(),
    ));
    for f in &found.findings {
        ui.always(format!(
            "  envelope {}: {}: {}",
            f.line,
            f.reason.map_or("accepted", |r| r.as_str()),
            escape_controls(&f.detail)
        ));
    }
    if found.malformed
        > found
            .findings
            .iter()
            .filter(|f| f.reason == Some(evidence::Reason::Malformed))
            .count()
    {
        ui.always(format!(
            "  {} malformed lines in all (at most {} are named)",
            found.malformed,
            evidence::MAX_MALFORMED_LISTED
        ));
    }
    if found.not_examined > 0 || found.signatures_not_checked > 0 {
        ui.always(format!(
            "  {} envelopes not examined, {} signatures not checked (at most {} checks a tree, {} an envelope, {} a key your trust does not name)",
            found.not_examined,
            found.signatures_not_checked,
            evidence::MAX_CHECKS,
            evidence::MAX_SIGNATURES,
            evidence::MAX_PER_UNNAMED_KEY
        ));
    }
}

fn verify(ui: &Ui, args: VerifyArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let mut all = true;
    let mut report = Vec::new();
    for rev in &args.revs {
        let Ok(commit) = repo.revparse_single(rev).and_then(|o| o.peel_to_commit()) else {
            all = false;
            missing_rev(ui, rev, args.json, &mut report);
            continue;
        };
        let found = evidence::examine(&repo, commit.tree_id())?;
        let accepted = found.accepted();
        all &= accepted.is_some();
        let short = git::short(&found.tree.to_string()).to_string();
        if args.json {
            report.push(json!({
                "rev": rev,
                "commit": commit.id().to_string(),
                "tree": found.tree.to_string(),
                "verified": accepted.is_some(),
                "signer": accepted.and_then(|a| a.signer.clone()),
                "required": found.required.iter().map(|c| evidence::statement::command_text(c)).collect::<Vec<_>>(),
                "envelopes": found.findings.iter().map(finding_json).collect::<Vec<_>>(),
                "malformed": found.malformed,
                "not_examined": found.not_examined,
                "duplicates": found.duplicates,
                "signatures_not_checked": found.signatures_not_checked,
            }));
            continue;
        }
        match accepted {
            Some(a) => ui.always(format!(
                "{} {} (tree {short}): attested by {} ({}{}): {}",
                console::style("verified").green().bold(),
                escape_controls(rev),
                escape_controls(a.signer.as_deref().unwrap_or("?")),
                a.format.map_or("?", |f| f.as_str()),
                if a.keyid.is_empty() {
                    String::new()
                } else {
                    format!(" {}", escape_controls(&a.keyid))
                },
                escape_controls(&a.detail)
            )),
            None => print_findings(ui, rev, &short, &found),
        }
    }
    if args.json {
        let text = serde_json::to_string_pretty(&json!({
            "verified": all,
            "revisions": report,
        }))
        .unwrap_or_default();
        ui.out(format!("{text}\n"));
    }
    Ok(if all { Exit::Success } else { Exit::Fail })
}
