//! Signed evidence (SPEC §6.1): a PASS anyone can check without running the checks again.
//!
//! An in-toto Statement about the result **tree** ([`statement`]), in a DSSE envelope
//! ([`dsse`]) signed with the user's git signing key ([`sign`]), kept as one line of the note
//! on the tree object in `refs/notes/factory-attest`. Every commit with that tree — after a
//! squash merge, a rebase, a cherry-pick — carries it; several signers are several lines.
//!
//! An envelope is accepted only when its signature verifies against the verifier's own trust,
//! its subject is that very tree, its result is PASSED, and the commands it lists include
//! every check the repository requires for that tree today.

pub mod dsse;
pub mod sign;
pub mod statement;

use crate::config::{self, Config};
use crate::error::{Error, Result};
use git2::{Oid, Repository};
pub use sign::{Checked, Format, Signer};

/// Where the envelopes live: a note on each tree object.
pub use crate::store::share::ATTEST_NOTES_REF as NOTES_REF;

/// What one PASS vouches for.
pub struct Evidence<'a> {
    pub tree: Oid,
    /// The result commit, when there is one (a second subject).
    pub commit: Option<Oid>,
    /// The commands that ran and passed, in order: verification, `pass_to_pass`,
    /// `fail_to_pass`, acceptance.
    pub commands: &'a [Vec<String>],
    pub work_order_sha256: Option<&'a str>,
    /// `refs/factory/<run_id>`.
    pub run_ref: Option<&'a str>,
}

/// Evidence written: who signed, and the note line.
#[derive(Debug, Clone)]
pub struct Attestation {
    pub format: Format,
    pub keyid: String,
    pub line: String,
}

/// The signing key `--attest` will use; none configured is a refusal (exit 2) with the
/// `git config` lines that set one. A run checks this before anything else happens.
pub fn require_signer(repo: &Repository) -> Result<Signer> {
    Signer::from_config(&Config::of(repo))
}

/// The plan stage of `git factory run`: whether this run attests (`--attest` / `--no-attest`
/// as `flag`, else git config `factory.attest`, else not) and with which key. Wanted but
/// key-less is a refusal (exit 2) with the `git config` lines that set a key, before any
/// model call or check.
pub fn signer_for_run(repo: &Repository, flag: Option<bool>) -> Result<Option<Signer>> {
    let cfg = Config::of(repo);
    let wanted = match flag {
        Some(on) => on,
        None => cfg.bool(config::ATTEST)?.unwrap_or(false),
    };
    if !wanted {
        return Ok(None);
    }
    Signer::from_config(&cfg).map(Some)
}

/// Signs `evidence` with `signer` and adds the envelope to the note on its tree.
pub fn attest(repo: &Repository, signer: &Signer, evidence: &Evidence<'_>) -> Result<Attestation> {
    let payload = statement::build(&statement::Facts {
        tree: evidence.tree,
        commit: evidence.commit,
        commands: evidence.commands,
        work_order_sha256: evidence.work_order_sha256,
        run_ref: evidence.run_ref,
        environment: statement::environment(evidence.commands),
    });
    let message = dsse::pae(dsse::IN_TOTO_PAYLOAD_TYPE, &payload);
    let (sig, keyid) = signer.sign(&message)?;
    let line = dsse::Envelope::new(dsse::IN_TOTO_PAYLOAD_TYPE, &payload, &keyid, &sig).to_line();
    crate::store::append_note_in(repo, NOTES_REF, evidence.tree, &line)?;
    Ok(Attestation {
        format: signer.format,
        keyid,
        line,
    })
}

/// The commands a passing attempt ran, in the order the statement lists them: verification,
/// `pass_to_pass`, `fail_to_pass`, acceptance (only those that succeeded: they are
/// `passedTests`).
pub fn commands_of(attempt: &crate::store::records::AttemptRecord) -> Vec<Vec<String>> {
    passed_commands(&[
        &attempt.verify,
        &attempt.pass_to_pass,
        &attempt.fail_to_pass,
        &attempt.acceptance,
    ])
}

fn passed_commands(lists: &[&[crate::store::records::CmdResult]]) -> Vec<Vec<String>> {
    lists
        .iter()
        .flat_map(|list| list.iter())
        .filter(|c| c.succeeded())
        .map(|c| c.command.clone())
        .collect()
}

/// The run's record stage on a PASS with `--attest`: signs with the user's key (checked up
/// front by [`require_signer`]) that `tree` (and `commit`) passed `commands`.
pub fn attest_pass(repo: &Repository, evidence: &Evidence<'_>) -> Result<Attestation> {
    attest(repo, &require_signer(repo)?, evidence)
}

/// A passing `git factory verify --attest`: the commit's tree passed the checks the repository
/// requires for it.
pub fn attest_verified(repo: &Repository, signer: &Signer, commit: Oid) -> Result<Attestation> {
    let commit = repo.find_commit(commit)?;
    let tree = commit.tree()?;
    let commands = required_checks(repo, &tree)?;
    attest(
        repo,
        signer,
        &Evidence {
            tree: tree.id(),
            commit: Some(commit.id()),
            commands: &commands,
            work_order_sha256: None,
            run_ref: None,
        },
    )
}

/// The checks the repository requires for `tree` today: `scripts/verify.sh` at that tree, or
/// `factory.verify` (SPEC §3.7).
pub fn required_checks(repo: &Repository, tree: &git2::Tree<'_>) -> Result<Vec<Vec<String>>> {
    crate::roles::po::verify::commands_for_tree(tree, &Config::of(repo).multi(config::VERIFY))
        .map_err(|e| Error::new(e).hint("fix git config factory.verify"))
}

/// Why an envelope was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Not an envelope of an in-toto test-result statement.
    Malformed,
    BadSignature,
    UntrustedSigner,
    /// Its subject is another tree (an envelope copied onto this one).
    OtherTree,
    /// Its result is not PASSED.
    NotPassed,
    /// It does not list every check the repository requires today.
    OtherChecks,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Malformed => "malformed",
            Reason::BadSignature => "bad signature",
            Reason::UntrustedSigner => "untrusted signer",
            Reason::OtherTree => "other tree",
            Reason::NotPassed => "not passed",
            Reason::OtherChecks => "other checks",
        }
    }
}

/// What one envelope is worth.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Who signed, when the signature is good and trusted.
    pub signer: Option<String>,
    pub format: Option<Format>,
    pub keyid: String,
    /// `None`: accepted.
    pub reason: Option<Reason>,
    pub detail: String,
}

impl Finding {
    fn refused(reason: Reason, detail: impl Into<String>) -> Self {
        Finding {
            signer: None,
            format: None,
            keyid: String::new(),
            reason: Some(reason),
            detail: detail.into(),
        }
    }
}

/// The evidence on one tree.
#[derive(Debug)]
pub struct TreeEvidence {
    pub tree: Oid,
    pub required: Vec<Vec<String>>,
    pub findings: Vec<Finding>,
    /// Envelopes past [`MAX_ENVELOPES`], not examined.
    pub not_examined: usize,
}

/// How many envelopes of one tree are examined: each costs a signature check (a program
/// run or two), and a note anyone can push to must not make a verifier run thousands.
pub const MAX_ENVELOPES: usize = 64;

impl TreeEvidence {
    /// The first envelope accepted, if any.
    pub fn accepted(&self) -> Option<&Finding> {
        self.findings.iter().find(|f| f.reason.is_none())
    }
}

/// Examines every envelope on `tree`'s note.
pub fn examine(repo: &Repository, tree: Oid) -> Result<TreeEvidence> {
    let cfg = Config::of(repo);
    let required = required_checks(repo, &repo.find_tree(tree)?)?;
    let text = repo
        .find_note(Some(NOTES_REF), tree)
        .ok()
        .map(|n| n.message_bytes().to_vec())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let findings = lines
        .iter()
        .take(MAX_ENVELOPES)
        .map(|line| examine_line(&cfg, tree, &required, line))
        .collect();
    Ok(TreeEvidence {
        tree,
        required,
        findings,
        not_examined: lines.len().saturating_sub(MAX_ENVELOPES),
    })
}

fn examine_line(cfg: &Config, tree: Oid, required: &[Vec<String>], line: &str) -> Finding {
    let envelope = match dsse::Envelope::from_line(line) {
        Ok(e) => e,
        Err(e) => return Finding::refused(Reason::Malformed, e),
    };
    if envelope.payload_type != dsse::IN_TOTO_PAYLOAD_TYPE {
        return Finding::refused(
            Reason::Malformed,
            format!(
                "payloadType is {:?}, not {}",
                envelope.payload_type,
                dsse::IN_TOTO_PAYLOAD_TYPE
            ),
        );
    }
    let (payload, signed) = match (envelope.payload_bytes(), envelope.signed_bytes()) {
        (Ok(p), Ok(s)) => (p, s),
        (Err(e), _) | (_, Err(e)) => return Finding::refused(Reason::Malformed, e),
    };
    // The signature first: nothing an envelope says is read before it is known who said it.
    let (format, signer, keyid) = match trusted_signature(cfg, &envelope, &signed) {
        Ok(t) => t,
        Err(refused) => return refused,
    };
    let by = |reason: Reason, detail: String| Finding {
        signer: Some(signer.clone()),
        format: Some(format),
        keyid: keyid.clone(),
        reason: Some(reason),
        detail,
    };
    let claims = match statement::read(&payload) {
        Ok(c) => c,
        Err(e) => return by(Reason::Malformed, e),
    };
    let tree_text = tree.to_string();
    if claims.trees.is_empty() || claims.trees.iter().any(|t| *t != tree_text) {
        return by(
            Reason::OtherTree,
            format!(
                "it is about tree {}, not {}",
                if claims.trees.is_empty() {
                    "(none)".to_string()
                } else {
                    claims.trees.join(", ")
                },
                tree_text
            ),
        );
    }
    if claims.result != "PASSED" {
        return by(
            Reason::NotPassed,
            format!("its result is {:?}, not PASSED", claims.result),
        );
    }
    let missing: Vec<String> = required
        .iter()
        .filter(|argv| !claims.passed_command(argv))
        .map(|argv| statement::command_text(argv))
        .collect();
    if !missing.is_empty() {
        return by(
            Reason::OtherChecks,
            format!(
                "it does not list {} (it lists: {})",
                missing.join(", "),
                claims.passed.join(", ")
            ),
        );
    }
    Finding {
        signer: Some(signer),
        format: Some(format),
        keyid,
        reason: None,
        detail: claims.passed.join(", "),
    }
}

/// The first signature of `envelope` that verifies over `signed` by a key the verifier trusts,
/// as (format, signer, key id); else the finding that says why none does (a bad signature
/// before an untrusted one: a changed payload is the news).
fn trusted_signature(
    cfg: &Config,
    envelope: &dsse::Envelope,
    signed: &[u8],
) -> std::result::Result<(Format, String, String), Finding> {
    let mut best: Option<Finding> = None;
    for sig in &envelope.signatures {
        let Ok(bytes) = dsse::decode(&sig.sig) else {
            best.get_or_insert(Finding::refused(
                Reason::Malformed,
                "a signature is not base64",
            ));
            continue;
        };
        match sign::check(cfg, signed, &bytes) {
            Checked::Trusted {
                format,
                signer,
                keyid,
            } => return Ok((format, signer, keyid)),
            Checked::Bad { why } => best = Some(Finding::refused(Reason::BadSignature, why)),
            Checked::Untrusted { format, why } => {
                if best
                    .as_ref()
                    .is_none_or(|b| b.reason != Some(Reason::BadSignature))
                {
                    best = Some(Finding {
                        format: Some(format),
                        keyid: sig.keyid.clone(),
                        ..Finding::refused(Reason::UntrustedSigner, why)
                    });
                }
            }
        }
    }
    Err(best
        .unwrap_or_else(|| Finding::refused(Reason::Malformed, "the envelope has no signature")))
}

/// Who attested `commit`'s tree, when an envelope on it is accepted (the pre-push hook's
/// fast path). Anything that goes wrong while looking is "not attested".
pub fn attested_by(repo: &Repository, commit: Oid) -> Option<String> {
    let tree = repo.find_commit(commit).ok()?.tree_id();
    if repo.find_note(Some(NOTES_REF), tree).is_err() {
        return None;
    }
    examine(repo, tree).ok()?.accepted()?.signer.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempts_commands_are_listed_in_the_order_they_ran() {
        use crate::store::records::CmdResult;
        let ran = |argv: &[&str], code: i32| CmdResult {
            command: argv.iter().map(|s| s.to_string()).collect(),
            exit_code: Some(code),
            timed_out: false,
            interrupted: false,
            signal: None,
            spawn_error: None,
            stdout_trunc: String::new(),
            stderr_trunc: String::new(),
            stdout_path: String::new(),
            stderr_path: String::new(),
            stdout_bytes: 0,
            stderr_bytes: 0,
            duration_seconds: 0.0,
            sandbox: None,
            sandbox_put_back: Vec::new(),
        };
        let words: Vec<String> = passed_commands(&[
            &[ran(&["bash", "scripts/verify.sh"], 0)],
            &[ran(&["pytest", "-q", "tests/old"], 0)],
            &[ran(&["pytest", "-q", "tests/new"], 0)],
            &[ran(&["make", "lint"], 0), ran(&["false"], 1)],
        ])
        .iter()
        .map(|c| c.join(" "))
        .collect();
        assert_eq!(
            words,
            [
                "bash scripts/verify.sh",
                "pytest -q tests/old",
                "pytest -q tests/new",
                "make lint"
            ]
        );
    }

    #[test]
    fn a_run_attests_when_asked_and_refuses_without_a_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let mut cfg = repo.config().expect("config");
        // Empty values hide whatever the user's own config says.
        cfg.set_str("user.signingKey", "").expect("set");
        cfg.set_str("gpg.format", "openpgp").expect("set");
        assert!(signer_for_run(&repo, None).expect("not wanted").is_none());
        assert!(signer_for_run(&repo, Some(false))
            .expect("not wanted")
            .is_none());
        let err = signer_for_run(&repo, Some(true)).expect_err("key-less");
        assert_eq!(err.exit, crate::error::Exit::Refused);
        assert!(err
            .details
            .iter()
            .any(|d| d.contains("git config user.signingKey")));
        cfg.set_bool(config::ATTEST, true).expect("set");
        assert!(
            signer_for_run(&repo, None).is_err(),
            "factory.attest asks too"
        );
        assert!(signer_for_run(&repo, Some(false))
            .expect("--no-attest wins")
            .is_none());
        let key = dir.path().join("id.pub");
        std::fs::write(&key, "ssh-ed25519 AAAA test\n").expect("write");
        cfg.set_str("gpg.format", "ssh").expect("set");
        cfg.set_str("gpg.ssh.program", "/bin/sh").expect("set");
        cfg.set_str("user.signingKey", &key.display().to_string())
            .expect("set");
        let signer = signer_for_run(&repo, None).expect("a key").expect("wanted");
        assert_eq!(signer.format, Format::Ssh);
        cfg.set_str("gpg.format", "x509").expect("set");
        assert!(
            signer_for_run(&repo, None).is_err(),
            "x509 cannot sign evidence"
        );
    }
}
