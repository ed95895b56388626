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
pub mod signature;
pub mod statement;
pub mod trust;

use crate::config::{self, Config};
use crate::error::{Error, Result};
use git2::{Oid, Repository};
pub use sign::{Checked, Format, Signer};
use std::collections::{HashMap, HashSet};
pub use trust::Trust;

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
    /// The tests the commands reported, one by one (SPEC §3.9).
    pub tests: statement::TestLists,
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
        tests: &evidence.tests,
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

/// The tests a passing attempt's commands reported, as the statement lists them: `COMMAND ::
/// TEST` in passedTests, a flaky one in warnedTests, a red one in failedTests.
pub fn tests_of(attempt: &crate::store::records::AttemptRecord) -> statement::TestLists {
    let mut lists = statement::TestLists::default();
    for report in attempt.commands().filter_map(|c| c.tests.as_ref()) {
        let cmd = statement::command_text(&report.command);
        for t in &report.tests {
            let entry = format!("{cmd} :: {}", t.id);
            if t.flaky {
                lists.warned.push(entry);
            } else if t.status.is_red() || t.status == crate::store::records::TestStatus::Missing {
                lists.failed.push(entry);
            } else if matches!(
                t.status,
                crate::store::records::TestStatus::Passed
                    | crate::store::records::TestStatus::Xpassed
            ) {
                lists.passed.push(entry);
            }
        }
    }
    lists
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
            tests: statement::TestLists::default(),
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
    /// Its line in the note (from 1).
    pub line: usize,
    /// Who signed, when the signature is good and trusted.
    pub signer: Option<String>,
    pub format: Option<Format>,
    /// The key that made the signature, as the checking program read it from the signature.
    pub keyid: String,
    /// The key id the envelope claims (DSSE's `keyid` hint): never trusted, only shown.
    pub claimed_keyid: String,
    /// `None`: accepted.
    pub reason: Option<Reason>,
    pub detail: String,
}

impl Finding {
    fn refused(line: usize, reason: Reason, detail: impl Into<String>) -> Self {
        Finding {
            line,
            signer: None,
            format: None,
            keyid: String::new(),
            claimed_keyid: String::new(),
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
    /// The envelopes examined, and the first [`MAX_MALFORMED_LISTED`] malformed lines, in
    /// the note's order.
    pub findings: Vec<Finding>,
    /// Lines that are not envelopes one could check (skipped without running anything).
    pub malformed: usize,
    /// Well-formed envelopes none of whose signatures was checked (the budget was spent).
    pub not_examined: usize,
    /// Lines identical to an earlier one (examined once: a copy says nothing new).
    pub duplicates: usize,
    /// Signatures not checked: past the budget of the tree, of an envelope, or of a key the
    /// verifier does not trust.
    pub signatures_not_checked: usize,
}

/// How many signatures of one tree are checked: each costs a program run or three, and a
/// note anyone can push to must not make a verifier run thousands.
pub const MAX_CHECKS: usize = 64;
/// How many signatures of one envelope are checked.
pub const MAX_SIGNATURES: usize = 8;
/// How many signatures by one key the verifier's trust does not name are checked (such a
/// key cannot vouch; one check names why).
pub const MAX_PER_UNNAMED_KEY: usize = 2;
/// A longer line is not an envelope (one is a few kilobytes).
pub const MAX_LINE_BYTES: usize = 256 * 1024;
/// A longer signature is not one (SSH and OpenPGP signatures are under a kilobyte or two).
pub const MAX_SIGNATURE_BYTES: usize = 16 * 1024;
/// How many malformed lines are named one by one; the rest are counted.
pub const MAX_MALFORMED_LISTED: usize = 16;

impl TreeEvidence {
    /// The first envelope accepted, if any.
    pub fn accepted(&self) -> Option<&Finding> {
        self.findings.iter().find(|f| f.reason.is_none())
    }
}

/// One signature of a well-formed envelope, decoded.
struct Sig {
    bytes: Vec<u8>,
    claimed: String,
    /// Whether the key visible in it is one the verifier's trust names (checked first).
    named: bool,
    /// The key visible in it (an SSH key's fingerprint, an OpenPGP issuer), for the budget
    /// of keys the verifier's trust does not name.
    key: String,
}

/// A well-formed envelope, ready to check.
struct Prepared {
    line: usize,
    payload: Vec<u8>,
    signed: Vec<u8>,
    sigs: Vec<Sig>,
    /// Signatures past [`MAX_SIGNATURES`] or not signatures at all.
    dropped: usize,
    /// Whether its statement, read before any signature is checked (a hint of order only,
    /// never believed), claims exactly this tree and a PASS.
    claims_this_tree: bool,
    /// How many earlier envelopes carry the same statement: a statement's first envelope is
    /// checked before any statement's second, so copies of one cannot crowd out another.
    repeat: usize,
}

/// What the note on `tree` says, as bytes: a NUL or a line that is not UTF-8 spoils that line
/// only.
fn note_bytes(repo: &Repository, tree: Oid) -> Vec<u8> {
    repo.find_note(Some(NOTES_REF), tree)
        .ok()
        .and_then(|n| repo.find_blob(n.id()).ok())
        .map(|b| b.content().to_vec())
        .unwrap_or_default()
}

/// Examines the envelopes on `tree`'s note, within the budgets above: malformed lines cost
/// nothing, envelopes whose key the verifier's trust names are checked first, and a key it
/// does not name is checked at most [`MAX_PER_UNNAMED_KEY`] times.
pub fn examine(repo: &Repository, tree: Oid) -> Result<TreeEvidence> {
    let trust = Trust::of(repo)?;
    let required = required_checks(repo, &repo.find_tree(tree)?)?;
    let mut found = TreeEvidence {
        tree,
        required,
        findings: Vec::new(),
        malformed: 0,
        not_examined: 0,
        duplicates: 0,
        signatures_not_checked: 0,
    };
    let mut ready = Vec::new();
    let bytes = note_bytes(repo, tree);
    let mut seen_lines = HashSet::new();
    let mut statements: HashMap<[u8; 32], usize> = HashMap::new();
    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = raw.trim_ascii();
        if line.is_empty() {
            continue;
        }
        if !seen_lines.insert(digest(line)) {
            found.duplicates += 1;
            continue;
        }
        match prepare(&trust, tree, i + 1, line) {
            Ok(mut p) => {
                let count = statements.entry(digest(&p.payload)).or_default();
                p.repeat = *count;
                *count += 1;
                ready.push(p)
            }
            Err(why) => {
                if found.malformed < MAX_MALFORMED_LISTED {
                    found
                        .findings
                        .push(Finding::refused(i + 1, Reason::Malformed, why));
                }
                found.malformed += 1;
            }
        }
    }
    // Envelopes with a signature by a key the verifier's trust names first, then the rest;
    // within each, those whose statement claims this tree's PASS, then each statement's first
    // envelope before any second one; then the note's order (which a union merge sorts, so
    // anyone who can push junk chooses it: it decides last).
    ready.sort_by_key(|p| {
        (
            !p.sigs.iter().any(|s| s.named),
            !p.claims_this_tree,
            p.repeat,
            p.line,
        )
    });
    let mut budget = Budget {
        left: MAX_CHECKS,
        per_key: HashMap::new(),
        skipped: 0,
        checked: HashMap::new(),
    };
    for p in &ready {
        let before = budget.skipped;
        match examine_envelope(&trust, tree, &found.required, p, &mut budget) {
            Some(f) => found.findings.push(f),
            None => found.not_examined += 1,
        }
        found.signatures_not_checked += budget.skipped - before + p.dropped;
    }
    found.findings.sort_by_key(|f| f.line);
    Ok(found)
}

/// A line, read as far as a signature check needs: an in-toto DSSE envelope whose payload and
/// signatures decode. Else why not.
fn prepare(
    trust: &Trust,
    tree: Oid,
    line: usize,
    text: &[u8],
) -> std::result::Result<Prepared, String> {
    if text.len() > MAX_LINE_BYTES {
        return Err(format!(
            "a line of {} bytes, longer than an envelope can be ({MAX_LINE_BYTES})",
            text.len()
        ));
    }
    if text.contains(&0) {
        return Err("a line with a NUL byte".into());
    }
    let text = std::str::from_utf8(text).map_err(|_| "a line that is not UTF-8".to_string())?;
    let envelope = dsse::Envelope::from_line(text)?;
    if envelope.payload_type != dsse::IN_TOTO_PAYLOAD_TYPE {
        return Err(format!(
            "payloadType is {:?}, not {}",
            envelope.payload_type,
            dsse::IN_TOTO_PAYLOAD_TYPE
        ));
    }
    let payload = envelope.payload_bytes()?;
    let signed = envelope.signed_bytes()?;
    let total = envelope.signatures.len();
    let mut sigs: Vec<Sig> = envelope
        .signatures
        .iter()
        .filter_map(|s| {
            let bytes = dsse::decode(&s.sig).ok()?;
            (!bytes.is_empty() && bytes.len() <= MAX_SIGNATURE_BYTES).then_some(())?;
            let key = sign::visible_key(&bytes)?;
            Some(Sig {
                named: trust.vouches_hint(&bytes),
                claimed: s.keyid.clone(),
                key,
                bytes,
            })
        })
        .collect();
    if sigs.is_empty() {
        return Err(if total == 0 {
            "the envelope has no signature".into()
        } else {
            format!("none of its {total} signatures is an SSH or OpenPGP signature")
        });
    }
    sigs.sort_by_key(|s| !s.named);
    let dropped = total - sigs.len().min(MAX_SIGNATURES);
    sigs.truncate(MAX_SIGNATURES);
    let tree_text = tree.to_string();
    let claims_this_tree = statement::read(&payload).is_ok_and(|c| {
        c.result == "PASSED" && !c.trees.is_empty() && c.trees.iter().all(|t| *t == tree_text)
    });
    Ok(Prepared {
        line,
        payload,
        signed,
        sigs,
        dropped,
        claims_this_tree,
        repeat: 0,
    })
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

/// The signature checks left for a tree.
struct Budget {
    left: usize,
    per_key: HashMap<String, usize>,
    skipped: usize,
    /// What each signature already checked over each signed text said: the same pair (one
    /// signature copied onto many envelopes of one statement) is checked once, for free after.
    checked: HashMap<([u8; 32], [u8; 32]), Checked>,
}

impl Budget {
    /// Whether `sig` may be checked (and if so, counts it).
    fn take(&mut self, sig: &Sig) -> bool {
        let used = self.per_key.get(&sig.key).copied().unwrap_or(0);
        if self.left == 0 || (!sig.named && used >= MAX_PER_UNNAMED_KEY) {
            self.skipped += 1;
            return false;
        }
        self.left -= 1;
        self.per_key.insert(sig.key.clone(), used + 1);
        true
    }
}

/// What one envelope is worth; `None` when none of its signatures could be checked.
fn examine_envelope(
    trust: &Trust,
    tree: Oid,
    required: &[Vec<String>],
    p: &Prepared,
    budget: &mut Budget,
) -> Option<Finding> {
    // The signature first: nothing an envelope says is read before it is known who said it.
    let (format, signer, keyid, claimed) = match trusted_signature(trust, p, budget)? {
        Ok(t) => t,
        Err(refused) => return Some(refused),
    };
    let by = |reason: Option<Reason>, detail: String| Finding {
        line: p.line,
        signer: Some(signer.clone()),
        format: Some(format),
        keyid: keyid.clone(),
        claimed_keyid: claimed.clone(),
        reason,
        detail,
    };
    let claims = match statement::read(&p.payload) {
        Ok(c) => c,
        Err(e) => return Some(by(Some(Reason::Malformed), e)),
    };
    let tree_text = tree.to_string();
    if claims.trees.is_empty() || claims.trees.iter().any(|t| *t != tree_text) {
        let about = if claims.trees.is_empty() {
            "(none)".to_string()
        } else {
            claims.trees.join(", ")
        };
        return Some(by(
            Some(Reason::OtherTree),
            format!("it is about tree {about}, not {tree_text}"),
        ));
    }
    if claims.result != "PASSED" {
        return Some(by(
            Some(Reason::NotPassed),
            format!("its result is {:?}, not PASSED", claims.result),
        ));
    }
    let missing: Vec<String> = required
        .iter()
        .filter(|argv| !claims.passed_command(argv))
        .map(|argv| statement::command_text(argv))
        .collect();
    if !missing.is_empty() {
        return Some(by(
            Some(Reason::OtherChecks),
            format!(
                "it does not list {} (it lists: {})",
                missing.join(", "),
                claims.passed.join(", ")
            ),
        ));
    }
    Some(by(None, claims.passed.join(", ")))
}

type Signed = (Format, String, String, String);

/// The first signature of `p` that verifies over its signed bytes by a key the verifier
/// trusts, as (format, signer, key id, claimed key id); else the finding that says why none
/// does (a bad signature before an untrusted one: a changed payload is the news). `None`
/// when the budget let none be checked.
fn trusted_signature(
    trust: &Trust,
    p: &Prepared,
    budget: &mut Budget,
) -> Option<std::result::Result<Signed, Finding>> {
    let mut best: Option<Finding> = None;
    let mut checked = 0;
    let signed = digest(&p.signed);
    for sig in &p.sigs {
        let pair = (signed, digest(&sig.bytes));
        let known = budget.checked.get(&pair).cloned();
        if known.is_none() && !budget.take(sig) {
            continue;
        }
        checked += 1;
        let refused = |reason, keyid: String, why: String| Finding {
            keyid,
            claimed_keyid: sig.claimed.clone(),
            ..Finding::refused(p.line, reason, why)
        };
        let result = known.unwrap_or_else(|| {
            let fresh = sign::check(trust, &p.signed, &sig.bytes);
            budget.checked.insert(pair, fresh.clone());
            fresh
        });
        match result {
            Checked::Trusted {
                format,
                signer,
                keyid,
            } => return Some(Ok((format, signer, keyid, sig.claimed.clone()))),
            Checked::Bad { keyid, why } => {
                best = Some(refused(Reason::BadSignature, keyid, why));
            }
            Checked::Untrusted { format, keyid, why } => {
                if best
                    .as_ref()
                    .is_none_or(|b| b.reason != Some(Reason::BadSignature))
                {
                    best = Some(Finding {
                        format: Some(format),
                        ..refused(Reason::UntrustedSigner, keyid, why)
                    });
                }
            }
        }
    }
    let mut best = best?;
    let unchecked = p.sigs.len() - checked + p.dropped;
    if unchecked > 0 {
        best.detail
            .push_str(&format!(" ({unchecked} more signatures not checked)"));
    }
    Some(Err(best))
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
            exit_code: Some(code),
            ..CmdResult::new(argv.iter().map(|s| s.to_string()).collect())
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
        // The private half beside it, readable: the key can sign.
        std::fs::write(
            dir.path().join("id"),
            "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        )
        .expect("write");
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
