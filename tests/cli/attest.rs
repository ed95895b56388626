//! Signed evidence (SPEC §6.1), against real OpenSSH and GnuPG keys made here in a temporary
//! HOME. Every envelope the product writes is also checked without it: decoded with
//! `base64`, DSSE's pre-authentication encoding rebuilt here, the signature verified with
//! `ssh-keygen -Y verify` / `gpg --verify`, the statement read by the in-toto field names.

use crate::common::*;
use serde_json::{json, Value};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const STATEMENT: &str = "https://in-toto.io/Statement/v1";
const TEST_RESULT: &str = "https://in-toto.io/attestation/test-result/v0.1";
const IN_TOTO_JSON: &str = "application/vnd.in-toto+json";

/// Whether ssh-keygen and gpg are here; off CI a test that needs them is skipped.
fn signing_tools_or_skip() -> bool {
    let here = [
        "ssh-keygen",
        "ssh-agent",
        "ssh-add",
        "gpg",
        "gpgconf",
        "base64",
    ]
    .iter()
    .all(|p| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if here {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "ssh-keygen or gpg is missing on CI"
    );
    eprintln!("ssh-keygen or gpg is not installed; skipping (.ci/run installs them)");
    false
}

/// A program run with the test's HOME (and its gpg home), checked to succeed.
fn tool(r: &TestRepo, program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("HOME", &r.home)
        .env("GNUPGHOME", gnupg_home(r))
        .env_remove("SSH_AUTH_SOCK")
        .current_dir(&r.root);
    cmd
}

fn ok(mut cmd: Command, input: Option<&[u8]>) -> Vec<u8> {
    let out = output(&mut cmd, input);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn output(cmd: &mut Command, input: Option<&[u8]>) -> std::process::Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawns");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.unwrap_or_default()).expect("stdin");
    drop(stdin);
    child.wait_with_output().expect("waits")
}

/// git factory with the test's gpg home and no ssh agent unless a test gives one.
fn gf(r: &TestRepo) -> assert_cmd::Command {
    let mut cmd = r.factory();
    cmd.env("GNUPGHOME", gnupg_home(r))
        .env_remove("SSH_AUTH_SOCK");
    cmd
}

fn gnupg_home(r: &TestRepo) -> PathBuf {
    r.home.join(".gnupg")
}

fn b64_decode(r: &TestRepo, text: &str) -> Vec<u8> {
    let mut cmd = tool(r, "base64");
    cmd.arg("-d");
    ok(cmd, Some(text.as_bytes()))
}

fn b64_encode(r: &TestRepo, bytes: &[u8], wrap: &str) -> String {
    let mut cmd = tool(r, "base64");
    cmd.args(["-w", wrap]);
    String::from_utf8(ok(cmd, Some(bytes)))
        .expect("ascii")
        .trim_end()
        .to_string()
}

/// DSSE v1's pre-authentication encoding, written from the protocol text.
fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

// ---------------------------------------------------------------------------------------------
// Keys

struct SshKey {
    private: PathBuf,
    public: PathBuf,
}

fn ssh_key(r: &TestRepo, name: &str) -> SshKey {
    let dir = r.home.join("keys");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let private = dir.join(name);
    let mut cmd = tool(r, "ssh-keygen");
    cmd.args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&private);
    ok(cmd, None);
    SshKey {
        public: dir.join(format!("{name}.pub")),
        private,
    }
}

fn public_text(key: &SshKey) -> String {
    std::fs::read_to_string(&key.public)
        .expect("public key")
        .trim()
        .to_string()
}

/// Adds `principal key` to the allowed signers file at `file`.
fn trust(file: &Path, principal: &str, key: &SshKey) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .expect("allowed signers");
    writeln!(f, "{principal} {}", public_text(key)).expect("write");
}

fn allowed_signers(r: &TestRepo) -> PathBuf {
    r.home.join("allowed_signers")
}

/// Signs with `key` (gpg.format=ssh) and trusts it as `principal` in this repo.
fn sign_with_ssh(r: &TestRepo, key: &SshKey, principal: &str) {
    trust(&allowed_signers(r), principal, key);
    r.git(&["config", "gpg.format", "ssh"]);
    r.git(&[
        "config",
        "user.signingKey",
        key.public.to_str().expect("utf8"),
    ]);
    r.git(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        allowed_signers(r).to_str().expect("utf8"),
    ]);
}

/// Stops the gpg-agent a test's gpg home started.
struct GpgHome(PathBuf);

impl Drop for GpgHome {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .args(["--kill", "gpg-agent"])
            .env("GNUPGHOME", &self.0)
            .status();
    }
}

/// A passphrase-less OpenPGP signing key for `uid` in the test's gpg home; its fingerprint.
fn gpg_key(r: &TestRepo, uid: &str) -> (String, GpgHome) {
    gpg_key_elsewhere(r, &gnupg_home(r), uid)
}

// ---------------------------------------------------------------------------------------------
// Reading what the product wrote, without the product

fn tree_of(r: &TestRepo, rev: &str) -> String {
    r.git(&["rev-parse", &format!("{rev}^{{tree}}")])
        .trim()
        .to_string()
}

/// The envelopes on `tree`'s note in refs/notes/factory-attest, one per non-empty line.
fn envelopes(r: &TestRepo, tree: &str) -> Vec<Value> {
    let (code, text) = r.git_code(&["notes", "--ref", "factory-attest", "show", tree]);
    if code != 0 {
        return Vec::new();
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("each line is a JSON envelope"))
        .collect()
}

fn set_note(r: &TestRepo, tree: &str, lines: &[String]) {
    let file = r.outside.join("note.txt");
    std::fs::write(&file, format!("{}\n", lines.join("\n"))).expect("write");
    r.git(&[
        "notes",
        "--ref",
        "factory-attest",
        "add",
        "-f",
        "-F",
        file.to_str().expect("utf8"),
        tree,
    ]);
}

fn statement_of(r: &TestRepo, envelope: &Value) -> Value {
    assert_eq!(envelope["payloadType"], IN_TOTO_JSON);
    let payload = b64_decode(r, envelope["payload"].as_str().expect("payload"));
    serde_json::from_slice(&payload).expect("the payload is JSON")
}

/// The in-toto names: a Statement v1 about `tree` (and `commit`) with the test-result
/// predicate, PASSED, listing `passed`.
fn check_statement(s: &Value, tree: &str, commit: Option<&str>, passed: &[&str]) {
    assert_eq!(s["_type"], STATEMENT, "{s:#}");
    assert_eq!(s["predicateType"], TEST_RESULT, "{s:#}");
    assert_eq!(s["subject"][0]["digest"]["gitTree"], tree, "{s:#}");
    match commit {
        Some(c) => assert_eq!(s["subject"][1]["digest"]["gitCommit"], c, "{s:#}"),
        None => assert!(s["subject"].get(1).is_none(), "{s:#}"),
    }
    let p = &s["predicate"];
    assert_eq!(p["result"], "PASSED", "{s:#}");
    assert_eq!(p["passedTests"], json!(passed), "{s:#}");
    assert_eq!(p["failedTests"], json!([]), "{s:#}");
    let configuration = p["configuration"].as_array().expect("configuration");
    let env = configuration
        .iter()
        .find(|c| c["name"] == "environment")
        .expect("the environment is named");
    assert_eq!(env["annotations"]["os"], std::env::consts::OS, "{s:#}");
    assert!(env["digest"]["sha256"].is_string(), "{s:#}");
    assert!(env["annotations"]["programs"].is_object(), "{s:#}");
}

/// `ssh-keygen -Y verify` of the envelope's first signature over the PAE rebuilt here.
fn ssh_verifies(r: &TestRepo, envelope: &Value, allowed: &Path, principal: &str) -> bool {
    let payload = b64_decode(r, envelope["payload"].as_str().expect("payload"));
    let message = pae(envelope["payloadType"].as_str().expect("type"), &payload);
    ssh_verifies_bytes(r, envelope, allowed, principal, &message)
}

fn ssh_verifies_bytes(
    r: &TestRepo,
    envelope: &Value,
    allowed: &Path,
    principal: &str,
    message: &[u8],
) -> bool {
    let blob = b64_decode(r, envelope["signatures"][0]["sig"].as_str().expect("sig"));
    assert!(blob.starts_with(b"SSHSIG"), "an SSH signature blob");
    let sig = r.outside.join("check.sig");
    std::fs::write(
        &sig,
        format!(
            "-----BEGIN SSH SIGNATURE-----\n{}\n-----END SSH SIGNATURE-----\n",
            b64_encode(r, &blob, "70")
        ),
    )
    .expect("write");
    let mut cmd = tool(r, "ssh-keygen");
    cmd.args(["-Y", "verify", "-n", "git-factory", "-f"])
        .arg(allowed)
        .args(["-I", principal, "-s"])
        .arg(&sig);
    output(&mut cmd, Some(message)).status.success()
}

/// `gpg --verify` of the envelope's first signature over the PAE rebuilt here.
fn gpg_verifies(r: &TestRepo, envelope: &Value) -> bool {
    let payload = b64_decode(r, envelope["payload"].as_str().expect("payload"));
    let message = r.outside.join("check.pae");
    std::fs::write(
        &message,
        pae(envelope["payloadType"].as_str().expect("type"), &payload),
    )
    .expect("write");
    let sig = r.outside.join("check.gpg");
    std::fs::write(
        &sig,
        b64_decode(r, envelope["signatures"][0]["sig"].as_str().expect("sig")),
    )
    .expect("write");
    let mut cmd = tool(r, "gpg");
    cmd.args(["--batch", "--verify"]).arg(&sig).arg(&message);
    output(&mut cmd, None).status.success()
}

/// An envelope made here, without the product: `statement` signed by `key` over its PAE.
fn envelope_signed_here(r: &TestRepo, key: &SshKey, statement: &Value) -> String {
    let payload = serde_json::to_vec(statement).expect("json");
    let message = r.outside.join("mine.pae");
    std::fs::write(&message, pae(IN_TOTO_JSON, &payload)).expect("write");
    let mut cmd = tool(r, "ssh-keygen");
    cmd.args(["-Y", "sign", "-n", "git-factory", "-f"])
        .arg(&key.private)
        .arg(&message);
    ok(cmd, None);
    let armoured = std::fs::read_to_string(r.outside.join("mine.pae.sig")).expect("sig");
    std::fs::remove_file(r.outside.join("mine.pae.sig")).expect("rm");
    let sig: String = armoured
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    json!({
        "payload": b64_encode(r, &payload, "0"),
        "payloadType": IN_TOTO_JSON,
        "signatures": [{"sig": sig}],
    })
    .to_string()
}

fn attest_verify(r: &TestRepo, revs: &[&str]) -> (i32, String, Value) {
    let out = gf(r)
        .args(["attest", "verify", "--json"])
        .args(revs)
        .output()
        .expect("runs");
    let json = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), stderr_of(&out), json)
}

/// The reasons given for each envelope of the first revision.
fn reasons(report: &Value) -> Vec<String> {
    report["revisions"][0]["envelopes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["reason"].as_str().unwrap_or("accepted").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn verify_attest(r: &TestRepo, rev: &str) -> std::process::Output {
    gf(r)
        .args(["verify", "--attest", rev])
        .output()
        .expect("runs")
}

/// Alice's SSH key, trusted and set as this repo's signer, and HEAD verified and attested
/// with it.
fn alice_attests_head(r: &TestRepo) -> SshKey {
    let alice = ssh_key(r, "alice");
    sign_with_ssh(r, &alice, "alice@example.com");
    let out = verify_attest(r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    alice
}

/// HEAD's tree and the first envelope in its note.
fn head_envelope(r: &TestRepo) -> (String, Value) {
    let tree = tree_of(r, "HEAD");
    let good = envelopes(r, &tree).remove(0);
    (tree, good)
}

// ---------------------------------------------------------------------------------------------

#[test]
fn ssh_evidence_is_a_signed_in_toto_statement_anyone_can_check() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let alice = ssh_key(&r, "alice");
    sign_with_ssh(&r, &alice, "alice@example.com");
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("attested tree"),
        "{}",
        stderr_of(&out)
    );

    let tree = tree_of(&r, "HEAD");
    let head = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    let found = envelopes(&r, &tree);
    assert_eq!(found.len(), 1, "one envelope per line");
    let envelope = &found[0];
    assert!(envelope["signatures"][0]["keyid"]
        .as_str()
        .is_some_and(|k| k.starts_with("SHA256:")));
    check_statement(&statement_of(&r, envelope), &tree, Some(&head), &["true"]);
    // The signature checks with ssh-keygen against the PAE rebuilt here, and only over it.
    assert!(ssh_verifies(
        &r,
        envelope,
        &allowed_signers(&r),
        "alice@example.com"
    ));
    assert!(!ssh_verifies_bytes(
        &r,
        envelope,
        &allowed_signers(&r),
        "alice@example.com",
        &b64_decode(&r, envelope["payload"].as_str().expect("payload")),
    ));

    let out = gf(&r).args(["attest", "verify"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("attested by alice@example.com"),
        "{}",
        stderr_of(&out)
    );
    let (code, _, report) = attest_verify(&r, &["HEAD", "main"]);
    assert_eq!(code, 0);
    assert_eq!(report["verified"], true);
    assert_eq!(report["revisions"][1]["signer"], "alice@example.com");
    assert_eq!(report["revisions"][0]["tree"], tree.as_str());
    assert_eq!(report["revisions"][0]["envelopes"][0]["format"], "ssh");

    // A failing check is never attested.
    r.write("app.txt", "broken\n");
    r.git(&["commit", "-qam", "broken"]);
    r.git(&["config", "factory.verify", "false"]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(envelopes(&r, &tree_of(&r, "HEAD")).is_empty());
}

#[test]
fn openpgp_evidence_checks_with_gpg_against_the_keyring() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let (fpr, _agent) = gpg_key(&r, "Bob <bob@example.com>");
    r.git(&["config", "user.signingKey", &fpr]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let tree = tree_of(&r, "HEAD");
    let found = envelopes(&r, &tree);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["signatures"][0]["keyid"], fpr.as_str());
    check_statement(
        &statement_of(&r, &found[0]),
        &tree,
        Some(r.git(&["rev-parse", "HEAD"]).trim()),
        &["true"],
    );
    assert!(gpg_verifies(&r, &found[0]));

    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["revisions"][0]["signer"], "Bob <bob@example.com>");
    assert_eq!(report["revisions"][0]["envelopes"][0]["format"], "openpgp");

    // A verifier whose keyring lacks the key does not accept it.
    let elsewhere = r.tmp.path().join("other-gnupg");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::fs::set_permissions(
        &elsewhere,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    let _other = GpgHome(elsewhere.clone());
    let out = gf(&r)
        .env("GNUPGHOME", &elsewhere)
        .args(["attest", "verify", "--json"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let report: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(reasons(&report), ["untrusted signer"]);
}

#[test]
fn the_evidence_follows_the_tree_through_squash_rebase_and_cherry_pick() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let alice = ssh_key(&r, "alice");
    sign_with_ssh(&r, &alice, "alice@example.com");
    let base = r.git(&["rev-parse", "HEAD"]).trim().to_string();
    r.git(&["checkout", "-q", "-b", "feature"]);
    r.write("app.txt", "one\nTWO\nthree\n");
    r.git(&["commit", "-qam", "feature: part one"]);
    r.write("other.txt", "keep me too\n");
    r.git(&["commit", "-qam", "feature: part two"]);
    let out = verify_attest(&r, "feature");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let attested = r.git(&["rev-parse", "feature"]).trim().to_string();
    let tree = tree_of(&r, "feature");

    // Squash merge: one new commit on main with the feature's tree.
    r.git(&["checkout", "-q", "main"]);
    r.git(&["merge", "-q", "--squash", "feature"]);
    r.git(&["commit", "-q", "-m", "feature, squashed"]);
    // Rebase: the commits made again (signed off) on the same base.
    r.git(&["checkout", "-q", "-b", "rebased", "feature"]);
    r.git(&["rebase", "-q", "--force-rebase", "--signoff", &base]);
    // Cherry-pick: the squashed commit picked onto a branch from the base.
    r.git(&["checkout", "-q", "-b", "picked", &base]);
    r.git(&["cherry-pick", "-x", "main"]);
    for rev in ["main", "rebased", "picked"] {
        let commit = r.git(&["rev-parse", rev]).trim().to_string();
        assert_ne!(commit, attested, "{rev} is another commit");
        assert_eq!(tree_of(&r, rev), tree, "{rev} has the attested tree");
        let (code, stderr, report) = attest_verify(&r, &[rev]);
        assert_eq!(code, 0, "{rev}: {stderr}");
        assert_eq!(report["revisions"][0]["signer"], "alice@example.com");
    }
    // Rebased onto a main that moved on, the tree is another one: nothing vouches for it.
    r.git(&["checkout", "-q", "-b", "moved", &base]);
    r.write("late.txt", "late\n");
    r.git(&["add", "late.txt"]);
    r.git(&["commit", "-qm", "late"]);
    r.git(&["checkout", "-q", "-b", "rebased-late", "feature"]);
    r.git(&["rebase", "-q", "moved"]);
    let out = gf(&r)
        .args(["attest", "verify", "rebased-late"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("no signed evidence on this tree"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn evidence_that_does_not_hold_is_refused_with_its_reason() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let alice = alice_attests_head(&r);
    let (tree, good) = head_envelope(&r);
    let good_line = good.to_string();

    // A changed payload under the old signature.
    let mut statement = statement_of(&r, &good);
    statement["predicate"]["passedTests"] = json!(["true", "echo all good"]);
    let mut tampered = good.clone();
    tampered["payload"] =
        b64_encode(&r, &serde_json::to_vec(&statement).expect("json"), "0").into();
    set_note(&r, &tree, &[tampered.to_string()]);
    let (code, _, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1);
    assert_eq!(reasons(&report), ["bad signature"]);

    // A key the verifier's allowed signers do not name, beside the good envelope: the good
    // one is accepted, the other named as untrusted.
    let carol = ssh_key(&r, "carol");
    r.git(&[
        "config",
        "user.signingKey",
        carol.public.to_str().expect("utf8"),
    ]);
    set_note(&r, &tree, &[]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let carols = envelopes(&r, &tree).remove(0);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(reasons(&report), ["untrusted signer"]);
    assert!(report["revisions"][0]["envelopes"][0]["detail"]
        .as_str()
        .is_some_and(|d| d.contains("is not in")));
    set_note(&r, &tree, &[carols.to_string(), good_line.clone()]);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["revisions"][0]["signer"], "alice@example.com");
    let mut both = reasons(&report);
    both.sort();
    assert_eq!(both, ["accepted", "untrusted signer"]);

    // A good envelope copied onto another tree.
    r.write("app.txt", "changed\n");
    r.git(&["commit", "-qam", "change"]);
    let other = tree_of(&r, "HEAD");
    set_note(&r, &other, std::slice::from_ref(&good_line));
    let out = gf(&r).args(["attest", "verify"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("envelope 1: other tree"),
        "{}",
        stderr_of(&out)
    );

    // A result that is not PASSED, signed by a trusted key (made here, not by the product).
    let mut failed = statement_of(&r, &good);
    failed["subject"] = json!([{"name": "tree", "digest": {"gitTree": other}}]);
    failed["predicate"]["result"] = "FAILED".into();
    set_note(&r, &other, &[envelope_signed_here(&r, &alice, &failed)]);
    let (code, _, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1);
    assert_eq!(reasons(&report), ["not passed"]);

    // The checks the repo requires changed after attesting.
    r.git(&["checkout", "-q", "HEAD~1"]);
    set_note(&r, &tree, &[good_line]);
    assert_eq!(attest_verify(&r, &["HEAD"]).0, 0);
    r.git(&["config", "factory.verify", "git diff --check"]);
    let out = gf(&r).args(["attest", "verify"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("other checks: it does not list git diff --check"),
        "{}",
        stderr_of(&out)
    );
    // Lines that are not envelopes cost no check: the first 16 are named malformed, all
    // are counted.
    let junk: Vec<String> = (0..70).map(|i| format!("PASS {i}")).collect();
    set_note(&r, &tree, &junk);
    let (code, _, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1);
    assert_eq!(reasons(&report), vec!["malformed"; 16]);
    assert_eq!(report["revisions"][0]["malformed"], 70);
    assert_eq!(report["revisions"][0]["not_examined"], 0);
}

/// Stops the ssh-agent a test started.
struct Agent(std::process::Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_check_cannot_sign_its_own_evidence() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    // The SSH key lives only in the agent (its file is gone); the OpenPGP key in the keyring.
    let alice = ssh_key(&r, "alice");
    sign_with_ssh(&r, &alice, "alice@example.com");
    let sock = r.home.join("agent.sock");
    let _agent = Agent(
        tool(&r, "ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent"),
    );
    // The socket appears a moment before the agent listens on it.
    wait_for(&sock);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let mut add = tool(&r, "ssh-add");
        add.env("SSH_AUTH_SOCK", &sock)
            .arg("-q")
            .arg(&alice.private);
        let out = output(&mut add, None);
        if out.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ssh-add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::remove_file(&alice.private).expect("rm");
    // The key as git also takes it: the public key itself, the agent holding its private half.
    r.git(&[
        "config",
        "user.signingKey",
        &format!("key::{}", public_text(&alice)),
    ]);
    let (_, _gpg) = gpg_key(&r, "Bob <bob@example.com>");

    // The check tries both ways to sign, and writes down how each went.
    let log = r.outside.join("signing.log");
    let script = r.outside.join("sign.sh");
    std::fs::write(
        &script,
        format!(
            "m=$(mktemp)\necho forged > \"$m\"\n\
             ssh-keygen -Y sign -n git-factory -f '{pubkey}' \"$m\" >/dev/null 2>&1; echo \"ssh $?\" >> '{log}'\n\
             gpg --batch --yes -u bob@example.com --detach-sign -o \"$m.gpg\" \"$m\" >/dev/null 2>&1; echo \"gpg $?\" >> '{log}'\n\
             echo \"agent ${{SSH_AUTH_SOCK:-none}}\" >> '{log}'\nrm -f \"$m\" \"$m.sig\" \"$m.gpg\"\n",
            pubkey = alice.public.display(),
            log = log.display()
        ),
    )
    .expect("write");
    r.git(&[
        "config",
        "factory.verify",
        &format!("sh {}", script.display()),
    ]);

    // Run by the test with the agent and the keyring, the script signs both ways...
    let mut by_hand = tool(&r, "sh");
    by_hand.env("SSH_AUTH_SOCK", &sock).arg(&script);
    ok(by_hand, None);
    let lines = std::fs::read_to_string(&log).expect("log");
    assert!(lines.starts_with("ssh 0\ngpg 0\n"), "{lines}");
    std::fs::remove_file(&log).expect("rm");

    // ...run as a check, it can do neither, while the harness signs with the agent's key.
    let out = gf(&r)
        .env("SSH_AUTH_SOCK", &sock)
        .args(["verify", "--attest"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let lines = std::fs::read_to_string(&log).expect("log");
    let mut it = lines.lines();
    assert!(
        it.next()
            .is_some_and(|l| l.starts_with("ssh ") && l != "ssh 0"),
        "{lines}"
    );
    assert!(
        it.next()
            .is_some_and(|l| l.starts_with("gpg ") && l != "gpg 0"),
        "{lines}"
    );
    assert_eq!(it.next(), Some("agent none"), "{lines}");
    let tree = tree_of(&r, "HEAD");
    assert_eq!(envelopes(&r, &tree).len(), 1);
    assert_eq!(attest_verify(&r, &["HEAD"]).0, 0);
}

#[test]
fn a_keyless_attest_is_refused_before_any_check_runs() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let marker = r.outside.join("ran");
    r.git(&[
        "config",
        "factory.verify",
        &format!("touch {}", marker.display()),
    ]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let stderr = stderr_of(&out);
    for line in [
        "user.signingKey is not set",
        "git config gpg.format ssh",
        "git config user.signingKey ~/.ssh/id_ed25519.pub",
        "git config gpg.ssh.allowedSignersFile",
    ] {
        assert!(stderr.contains(line), "{line}: {stderr}");
    }
    assert!(!marker.exists(), "no check ran");
    assert_eq!(
        r.git_code(&["rev-parse", "-q", "--verify", "refs/notes/factory-attest"])
            .0,
        1
    );
    // An SSH key that is not there is refused up front too.
    r.git(&["config", "gpg.format", "ssh"]);
    r.git(&["config", "user.signingKey", "~/.ssh/missing.pub"]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("is not a file"),
        "{}",
        stderr_of(&out)
    );
    assert!(!marker.exists(), "no check ran");
}

/// As the shared `in_dir`, with this file's signing environment.
fn in_dir(r: &TestRepo, dir: &Path, program: &str, args: &[&str]) -> std::process::Output {
    command_in(r, dir, program)
        .env("GNUPGHOME", gnupg_home(r))
        .env_remove("SSH_AUTH_SOCK")
        .args(args)
        .output()
        .expect("runs")
}

#[test]
fn two_clones_share_evidence_through_push_and_fetch() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let bare = origin_with_main(&r);
    let other = clone_of(&r, &bare, "other");

    // Clone one attests and pushes.
    let alice = alice_attests_head(&r);
    let out = gf(&r).args(["push"]).output().expect("push");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));

    // Clone two fetches; it trusts nobody yet, then alice.
    let out = in_dir(&r, &other, "factory", &["fetch"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = in_dir(&r, &other, "factory", &["attest", "verify", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let report: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
    assert_eq!(reasons(&report), ["untrusted signer"]);
    let theirs = r.tmp.path().join("other_allowed_signers");
    trust(&theirs, "alice@example.com", &alice);
    assert!(in_dir(
        &r,
        &other,
        "git",
        &[
            "config",
            "gpg.ssh.allowedSignersFile",
            theirs.to_str().expect("utf8")
        ]
    )
    .status
    .success());
    let out = in_dir(&r, &other, "factory", &["attest", "verify", "HEAD"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("attested by alice@example.com"),
        "{}",
        stderr_of(&out)
    );

    // Clone two adds its own signer; the notes merge, one envelope per line, both kept.
    let bob = ssh_key(&r, "bob");
    for (k, v) in [
        ("gpg.format", "ssh"),
        ("user.signingKey", bob.public.to_str().expect("utf8")),
    ] {
        assert!(in_dir(&r, &other, "git", &["config", k, v])
            .status
            .success());
    }
    let out = in_dir(&r, &other, "factory", &["verify", "--attest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = in_dir(&r, &other, "factory", &["push"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = gf(&r).args(["fetch"]).output().expect("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let tree = tree_of(&r, "HEAD");
    let lines = envelopes(&r, &tree);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for e in &lines {
        check_statement(
            &statement_of(&r, e),
            &tree,
            Some(r.git(&["rev-parse", "HEAD"]).trim()),
            &["true"],
        );
    }
    trust(&allowed_signers(&r), "bob@example.com", &bob);
    assert!(lines
        .iter()
        .any(|e| ssh_verifies(&r, e, &allowed_signers(&r), "bob@example.com")));
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(reasons(&report), ["accepted", "accepted"]);
}

#[test]
fn the_pre_push_hook_lets_an_attested_tip_through_at_once() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let counter = r.outside.join("count");
    r.git(&[
        "config",
        "factory.verify",
        &format!("sh -c 'echo ran >> {}'", counter.display()),
    ]);
    bare_remote(&r);
    let alice = ssh_key(&r, "alice");
    sign_with_ssh(&r, &alice, "alice@example.com");
    gf(&r).args(["hook", "install"]).assert().success();
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let ran = || {
        std::fs::read_to_string(&counter)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    assert_eq!(ran(), 1);
    // Without the local cache of passes, only the evidence can let it through unverified.
    r.git(&["update-ref", "-d", "refs/notes/factory-verify"]);
    let bin = assert_cmd::cargo::cargo_bin("git-factory");
    let path = format!(
        "{}:{}",
        bin.parent().expect("dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let push = |rev: &str| {
        let mut cmd = assert_cmd::Command::new("git");
        hermetic(&mut cmd, &r.home);
        cmd.current_dir(&r.root)
            .env("PATH", &path)
            .env("GNUPGHOME", gnupg_home(&r))
            .env_remove("SSH_AUTH_SOCK")
            .args(["push", "origin", &format!("{rev}:refs/heads/main")])
            .output()
            .expect("push")
    };
    let out = push("HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("HEAD attested by alice@example.com"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(ran(), 1, "the attested tip was not verified again");
    // A tip nobody attested is verified as before.
    r.write("app.txt", "new\n");
    r.git(&["commit", "-qam", "new"]);
    let out = push("HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("verified"), "{}", stderr_of(&out));
    assert_eq!(ran(), 2);
}

#[test]
fn keys_the_verifier_revoked_or_limited_to_commits_do_not_vouch() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let alice = alice_attests_head(&r);
    assert_eq!(attest_verify(&r, &["HEAD"]).0, 0);
    // Revoked in gpg.ssh.revocationFile.
    let revoked = r.home.join("revoked_keys");
    std::fs::write(&revoked, format!("{}\n", public_text(&alice))).expect("write");
    r.git(&[
        "config",
        "gpg.ssh.revocationFile",
        revoked.to_str().expect("utf8"),
    ]);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(reasons(&report), ["untrusted signer"]);
    r.git(&["config", "--unset", "gpg.ssh.revocationFile"]);
    // Trusted for commits only: a commit signature is never evidence, nor the other way.
    std::fs::write(
        allowed_signers(&r),
        format!(
            "alice@example.com namespaces=\"git\" {}\n",
            public_text(&alice)
        ),
    )
    .expect("write");
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(reasons(&report), ["untrusted signer"]);
    assert!(report["revisions"][0]["envelopes"][0]["detail"]
        .as_str()
        .is_some_and(|d| d.contains("other namespaces")));
    std::fs::write(
        allowed_signers(&r),
        format!(
            "alice@example.com namespaces=\"git,git-factory\" {}\n",
            public_text(&alice)
        ),
    )
    .expect("write");
    assert_eq!(attest_verify(&r, &["HEAD"]).0, 0);
}

/// A passphrase-less OpenPGP key for `uid` in a gpg home of its own (someone else's keyring);
/// its fingerprint.
fn gpg_key_elsewhere(r: &TestRepo, home: &Path, uid: &str) -> (String, GpgHome) {
    std::fs::create_dir_all(home).expect("mkdir");
    std::fs::set_permissions(home, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let guard = GpgHome(home.to_path_buf());
    let mut cmd = tool(r, "gpg");
    cmd.env("GNUPGHOME", home).args([
        "--batch",
        "--passphrase",
        "",
        "--quick-gen-key",
        uid,
        "ed25519",
        "sign",
        "never",
    ]);
    ok(cmd, None);
    let mut cmd = tool(r, "gpg");
    cmd.env("GNUPGHOME", home)
        .args(["--batch", "--with-colons", "--list-secret-keys", uid]);
    let listing = String::from_utf8(ok(cmd, None)).expect("utf8");
    let fpr = listing
        .lines()
        .find_map(|l| l.strip_prefix("fpr:"))
        .and_then(|l| l.split(':').find(|f| !f.is_empty()))
        .expect("fingerprint")
        .to_string();
    (fpr, guard)
}

/// `statement` signed over its PAE by the OpenPGP key `uid` of the gpg home `home`.
fn gpg_envelope_signed_in(r: &TestRepo, home: &Path, uid: &str, statement: &Value) -> String {
    let payload = serde_json::to_vec(statement).expect("json");
    let message = r.outside.join("gpg.pae");
    std::fs::write(&message, pae(IN_TOTO_JSON, &payload)).expect("write");
    let sig = r.outside.join("gpg.pae.sig");
    let mut cmd = tool(r, "gpg");
    cmd.env("GNUPGHOME", home)
        .args([
            "--batch",
            "--yes",
            "--local-user",
            uid,
            "--detach-sign",
            "-o",
        ])
        .arg(&sig)
        .arg(&message);
    ok(cmd, None);
    json!({
        "payload": b64_encode(r, &payload, "0"),
        "payloadType": IN_TOTO_JSON,
        "signatures": [{"sig": b64_encode(r, &std::fs::read(&sig).expect("sig"), "0")}],
    })
    .to_string()
}

#[test]
fn openpgp_trust_is_the_validity_the_verifier_gave_the_key() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    // gpg writes a '%' in a user id as %25 on its status lines; the signer is named as is.
    let (fpr, _agent) = gpg_key(&r, "Bob 100% <bob@example.com>");
    r.git(&["config", "user.signingKey", &fpr]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        report["revisions"][0]["signer"],
        "Bob 100% <bob@example.com>"
    );
    let tree = tree_of(&r, "HEAD");
    let good = envelopes(&r, &tree).remove(0);

    // Mallory's key is in the keyring (imported), but nobody the verifier trusts certified
    // it: its validity is unknown, whatever name it gives itself.
    let theirs = r.tmp.path().join("mallory-gnupg");
    let (mallory, _theirs) = gpg_key_elsewhere(&r, &theirs, "Alice Admin <alice@example.com>");
    let forged = gpg_envelope_signed_in(&r, &theirs, &mallory, &statement_of(&r, &good));
    let exported = r.outside.join("mallory.asc");
    let mut cmd = tool(&r, "gpg");
    cmd.env("GNUPGHOME", &theirs)
        .args(["--batch", "--armor", "--output"])
        .arg(&exported)
        .args(["--export", &mallory]);
    ok(cmd, None);
    let mut cmd = tool(&r, "gpg");
    cmd.args(["--batch", "--import"]).arg(&exported);
    ok(cmd, None);
    set_note(&r, &tree, &[forged]);
    // The verifier signs with ssh itself: OpenPGP evidence is still held to its keyring's trust.
    r.git(&["config", "gpg.format", "ssh"]);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(reasons(&report), ["untrusted signer"]);
    assert_eq!(report["revisions"][0]["signer"], Value::Null);
    let detail = report["revisions"][0]["envelopes"][0]["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains("marginal"), "{detail}");
    assert_eq!(
        report["revisions"][0]["envelopes"][0]["keyid"],
        mallory.as_str()
    );

    // A minTrustLevel git does not know is refused as git refuses it, naming the valid ones.
    r.git(&["config", "gpg.minTrustLevel", "full"]);
    let out = gf(&r).args(["attest", "verify"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    for word in [
        "\"full\"",
        "undefined",
        "never",
        "marginal",
        "fully",
        "ultimate",
    ] {
        assert!(
            stderr_of(&out).contains(word),
            "{word}: {}",
            stderr_of(&out)
        );
    }
    // Lowered on purpose, the verifier accepts what it chose to accept.
    r.git(&["config", "gpg.minTrustLevel", "undefined"]);
    assert_eq!(attest_verify(&r, &["HEAD"]).0, 0);
    r.git(&["config", "--unset", "gpg.minTrustLevel"]);
    assert_eq!(attest_verify(&r, &["HEAD"]).0, 1);
    // Certified by the verifier's own key, it is valid, and vouches.
    let mut cmd = tool(&r, "gpg");
    cmd.args(["--batch", "--yes", "--quick-lsign-key", &mallory]);
    ok(cmd, None);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        report["revisions"][0]["signer"],
        "Alice Admin <alice@example.com>"
    );
}

#[test]
fn an_allowed_signers_file_in_the_repository_is_never_trusted() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let alice = alice_attests_head(&r);
    // The file git's documentation suggests, committed: a change could add its own key.
    trust(&r.root.join(".gitsigners"), "alice@example.com", &alice);
    r.git(&["add", ".gitsigners"]);
    r.git(&["commit", "-qm", "signers"]);
    r.git(&["config", "factory.verify", "true"]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    for (file, sub) in [(".gitsigners", ""), ("sub/../.gitsigners", "sub")] {
        std::fs::create_dir_all(r.root.join("sub")).expect("mkdir");
        r.git(&["config", "gpg.ssh.allowedSignersFile", file]);
        let out = gf(&r)
            .current_dir(r.root.join(sub))
            .args(["attest", "verify", "--json"])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
        let report: Value = serde_json::from_str(&stdout_of(&out)).expect("json");
        assert_eq!(reasons(&report), ["untrusted signer"]);
        let detail = report["revisions"][0]["envelopes"][0]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(detail.contains(".gitsigners"), "{detail}");
        assert!(detail.contains("outside the repository"), "{detail}");
    }
    // A relative path outside the work tree is read as git reads it, from the top of the
    // work tree: the verdict is the same from any folder.
    trust(
        &r.tmp.path().join("team_signers"),
        "alice@example.com",
        &alice,
    );
    r.git(&["config", "gpg.ssh.allowedSignersFile", "../team_signers"]);
    for sub in ["", "sub"] {
        let out = gf(&r)
            .current_dir(r.root.join(sub))
            .args(["attest", "verify"])
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "from {sub:?}: {}",
            stderr_of(&out)
        );
    }
}

#[test]
fn a_note_can_neither_make_the_verifier_check_without_end_nor_hide_a_good_envelope() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    alice_attests_head(&r);
    let (tree, good) = head_envelope(&r);
    let carol = ssh_key(&r, "carol");
    let carols: Value =
        serde_json::from_str(&envelope_signed_here(&r, &carol, &statement_of(&r, &good)))
            .expect("json");

    // One envelope with 300 signatures: a handful are checked, the rest counted.
    let mut many = carols.clone();
    many["signatures"] = Value::Array(vec![carols["signatures"][0].clone(); 300]);
    set_note(&r, &tree, &[many.to_string()]);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(reasons(&report), ["untrusted signer"]);
    let skipped = report["revisions"][0]["signatures_not_checked"]
        .as_u64()
        .unwrap_or(0);
    assert!(skipped >= 290, "{report:#}");

    // Junk first (as the union merge may sort it), then 80 good signatures by a key nobody
    // trusts, then the good envelope: malformed lines cost nothing, an untrusted key is not
    // checked again and again, and the envelope by a trusted key is found.
    let mut lines: Vec<String> = (0..100).map(|i| format!("!junk {i}")).collect();
    for i in 0..80 {
        let mut e = carols.clone();
        e["signatures"][0]["keyid"] = format!("k{i}").into();
        lines.push(e.to_string());
    }
    lines.push(good.to_string());
    set_note(&r, &tree, &lines);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr} {report:#}");
    assert_eq!(report["revisions"][0]["signer"], "alice@example.com");
    assert_eq!(report["revisions"][0]["malformed"], 100);

    // A NUL in the note does not cut it short: the bad line is skipped, the good one read.
    let blob = r.outside.join("nul-note");
    let mut bytes = b"junk\0junk\n".to_vec();
    bytes.extend_from_slice(good.to_string().as_bytes());
    bytes.push(b'\n');
    std::fs::write(&blob, &bytes).expect("write");
    let id = r
        .git(&["hash-object", "-w", blob.to_str().expect("utf8")])
        .trim()
        .to_string();
    r.git(&[
        "notes",
        "--ref",
        "factory-attest",
        "add",
        "-f",
        "-C",
        &id,
        &tree,
    ]);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr} {report:#}");
}

#[test]
fn an_untrusted_envelope_names_the_key_that_signed_it() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    alice_attests_head(&r);
    let (tree, good) = head_envelope(&r);
    let alices = good["signatures"][0]["keyid"]
        .as_str()
        .expect("keyid")
        .to_string();
    let carol = ssh_key(&r, "carol");
    let mut forged: Value =
        serde_json::from_str(&envelope_signed_here(&r, &carol, &statement_of(&r, &good)))
            .expect("json");
    let claim = format!("{alices}\u{1b}[2J");
    forged["signatures"][0]["keyid"] = claim.clone().into();
    set_note(&r, &tree, &[forged.to_string()]);
    let mut cmd = tool(&r, "ssh-keygen");
    cmd.arg("-lf").arg(&carol.public);
    let listed = String::from_utf8(ok(cmd, None)).expect("utf8");
    let carols = listed.split_whitespace().nth(1).expect("fingerprint");
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    let e = &report["revisions"][0]["envelopes"][0];
    assert_eq!(e["reason"], "untrusted signer");
    assert_eq!(e["keyid"], carols, "{e:#}");
    assert_eq!(e["claimed_keyid"], claim.as_str(), "{e:#}");
    let out = gf(&r).args(["attest", "verify"]).output().expect("runs");
    assert!(!stderr_of(&out).contains('\u{1b}'), "{}", stderr_of(&out));
}

#[test]
fn a_signing_key_that_cannot_sign_is_refused_before_any_check_runs() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let marker = r.outside.join("ran");
    r.git(&[
        "config",
        "factory.verify",
        &format!("touch {}", marker.display()),
    ]);
    let (_, _gpg) = gpg_key(&r, "Bob <bob@example.com>");
    r.git(&["config", "user.signingKey", "NOSUCHKEY"]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("NOSUCHKEY"), "{}", stderr_of(&out));
    assert!(!marker.exists(), "no check ran");
    for notes in ["refs/notes/factory-verify", "refs/notes/factory-attest"] {
        assert_eq!(
            r.git_code(&["rev-parse", "-q", "--verify", notes]).0,
            1,
            "{notes}"
        );
    }
    // An SSH public key whose private half is neither beside it nor in an agent.
    let alice = ssh_key(&r, "alice");
    sign_with_ssh(&r, &alice, "alice@example.com");
    std::fs::remove_file(&alice.private).expect("rm");
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("ssh-agent"), "{}", stderr_of(&out));
    assert!(!marker.exists(), "no check ran");
}

#[test]
fn a_revision_that_is_not_there_is_reported_with_the_others() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    alice_attests_head(&r);
    let (code, stderr, report) = attest_verify(&r, &["HEAD", "no-such-rev"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["verified"], false);
    assert_eq!(report["revisions"][0]["verified"], true);
    assert_eq!(report["revisions"][1]["rev"], "no-such-rev");
    assert_eq!(report["revisions"][1]["verified"], false);
    assert!(report["revisions"][1]["error"]
        .as_str()
        .is_some_and(|e| e.contains("not a commit")));
}

/// Checking evidence writes nothing into the verifier's keyring: a signature that carries its
/// key (`--include-key-block`) is not imported, even where the user's gpg.conf asks gpg to
/// import such keys (SPEC §7: nothing is written outside git-factory's own places).
#[test]
fn checking_evidence_never_imports_a_key_into_the_keyring() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    let (fpr, _agent) = gpg_key(&r, "Bob <bob@example.com>");
    r.git(&["config", "user.signingKey", &fpr]);
    let out = verify_attest(&r, "HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let tree = tree_of(&r, "HEAD");
    let good = envelopes(&r, &tree).remove(0);
    let conf = gnupg_home(&r).join("gpg.conf");
    let mut text = std::fs::read(&conf).unwrap_or_default();
    text.extend_from_slice(b"\nauto-key-import\n");
    std::fs::write(&conf, text).expect("gpg.conf");

    let theirs = r.tmp.path().join("mallory-gnupg");
    let (mallory, _theirs) = gpg_key_elsewhere(&r, &theirs, "Mallory <m@example.com>");
    let payload = serde_json::to_vec(&statement_of(&r, &good)).expect("json");
    let message = r.outside.join("m.pae");
    std::fs::write(&message, pae(IN_TOTO_JSON, &payload)).expect("write");
    let sig = r.outside.join("m.pae.sig");
    let mut cmd = tool(&r, "gpg");
    cmd.env("GNUPGHOME", &theirs)
        .args(["--batch", "--yes", "--include-key-block", "--local-user"])
        .arg(&mallory)
        .args(["--detach-sign", "-o"])
        .arg(&sig)
        .arg(&message);
    ok(cmd, None);
    let forged = json!({
        "payload": b64_encode(&r, &payload, "0"),
        "payloadType": IN_TOTO_JSON,
        "signatures": [{"sig": b64_encode(&r, &std::fs::read(&sig).expect("sig"), "0")}],
    })
    .to_string();
    set_note(&r, &tree, &[forged]);
    let (code, stderr, _) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 1, "{stderr}");
    let mut cmd = tool(&r, "gpg");
    cmd.args(["--batch", "--list-keys", &mallory]);
    let listed = output(&mut cmd, None);
    assert!(
        !listed.status.success(),
        "mallory's key was imported: {}",
        String::from_utf8_lossy(&listed.stdout)
    );
}

#[test]
fn junk_signed_with_a_trusted_keys_stolen_signature_cannot_hide_the_good_envelope() {
    if !signing_tools_or_skip() {
        return;
    }
    let r = TestRepo::simple();
    alice_attests_head(&r);
    let (tree, good) = head_envelope(&r);
    let statement = statement_of(&r, &good);
    // Alice's signature (it names her key, so it is checked first) copied onto statements it
    // does not sign: one about this tree, many times over, and a hundred about other trees,
    // each different. The union merge sorts them before the good envelope.
    let forged = |s: &Value| {
        let mut e = good.clone();
        e["payload"] = b64_encode(&r, &serde_json::to_vec(s).expect("json"), "0").into();
        e.to_string()
    };
    let mut same = statement.clone();
    same["predicate"]["url"] = "refs/factory/not-this-one".into();
    let mut lines = vec![forged(&same); 100];
    for i in 0..100 {
        let mut other = statement.clone();
        other["subject"][0]["digest"]["gitTree"] = format!("{i:040x}").into();
        lines.push(forged(&other));
    }
    lines.push(good.to_string());
    set_note(&r, &tree, &lines);
    let (code, stderr, report) = attest_verify(&r, &["HEAD"]);
    assert_eq!(code, 0, "{stderr} {report:#}");
    assert_eq!(report["revisions"][0]["signer"], "alice@example.com");
    assert_eq!(report["revisions"][0]["duplicates"], 99, "{report:#}");
}
