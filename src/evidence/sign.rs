//! Signing and checking signatures with the programs git itself uses: `ssh-keygen -Y` for
//! `gpg.format=ssh` (namespace `git-factory`), `gpg` for OpenPGP. The key is the one the user
//! signs commits with (`user.signingKey`); trust is the verifier's own: the allowed signers
//! file (`gpg.ssh.allowedSignersFile`) for SSH, the keyring for OpenPGP. A key carried by an
//! envelope is never used to check it.

use super::signature::{gpg_program, ssh_key_blob, ssh_program, SSHSIG_MAGIC};
use super::trust::{expand_home, Trust, TRUST_LEVELS};
use crate::config::Config;
use crate::error::{Error, Result};
use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The SSH signature namespace of the evidence: a signature made for a commit (`git`) or a
/// file (`file`) is never one over evidence, nor the other way round.
pub const NAMESPACE: &str = "git-factory";

const SIGNING_KEY: &str = "user.signingKey";
const FORMAT: &str = "gpg.format";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Ssh,
    OpenPgp,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Ssh => "ssh",
            Format::OpenPgp => "openpgp",
        }
    }
}

/// The user's signing key, as git would use it.
#[derive(Debug, Clone)]
pub struct Signer {
    pub format: Format,
    /// An SSH key file (private, or public with the private half in the agent), an SSH
    /// public key given literally (`key::ssh-ed25519 …`, held by the agent), or an OpenPGP
    /// key id.
    key: String,
    program: String,
}

/// The `git config` lines that set a signing key, for a refusal.
fn key_lines() -> Vec<String> {
    [
        "git config gpg.format ssh",
        "git config user.signingKey ~/.ssh/id_ed25519.pub",
        "git config gpg.ssh.allowedSignersFile ~/.ssh/allowed_signers",
        "(or, for OpenPGP: git config user.signingKey <your key id>)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn format_of(cfg: &Config) -> Result<Format> {
    match cfg
        .string(FORMAT)
        .map(|f| f.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("openpgp") => Ok(Format::OpenPgp),
        Some("ssh") => Ok(Format::Ssh),
        Some(other) => Err(Error::new(format!(
            "git config gpg.format is {other:?}: signed evidence is made with ssh or openpgp keys"
        ))
        .hint("git config gpg.format ssh (or openpgp), with user.signingKey naming the key")),
    }
}

/// Whether `program` can be started: a path to a file, or a name found on PATH.
fn runnable(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    crate::env::path_dirs()
        .iter()
        .any(|dir| dir.join(program).is_file())
}

impl Signer {
    /// The user's signing key from git config; none configured (or one that cannot be used)
    /// is a refusal naming the `git config` lines that set one.
    pub fn from_config(cfg: &Config) -> Result<Signer> {
        let format = format_of(cfg)?;
        let Some(key) = cfg.string(SIGNING_KEY) else {
            let mut err = Error::new(
                "--attest signs the evidence with your git signing key, and none is configured (user.signingKey is not set)",
            );
            for line in key_lines() {
                err = err.detail(line);
            }
            return Err(err.hint("set one with the git config lines above, then run again"));
        };
        let program = match format {
            Format::Ssh => ssh_program(cfg),
            Format::OpenPgp => gpg_program(cfg),
        };
        if !runnable(&program) {
            return Err(Error::new(format!(
                "--attest signs with {program}, which is not installed or not on PATH"
            ))
            .hint(match format {
                Format::Ssh => "install OpenSSH's ssh-keygen (apt-get install openssh-client), or set gpg.ssh.program",
                Format::OpenPgp => "install GnuPG (apt-get install gnupg), or set gpg.program",
            }));
        }
        if format == Format::Ssh && !is_literal_ssh_key(&key) && !expand_home(&key).is_file() {
            return Err(Error::new(format!(
                "user.signingKey names {key}, which is not a file: there is no SSH key to sign with"
            ))
            .hint("git config user.signingKey ~/.ssh/id_ed25519.pub (a key file, or key::<public key> held by ssh-agent)"));
        }
        let signer = Signer {
            format,
            key,
            program,
        };
        signer.can_sign()?;
        Ok(signer)
    }

    /// Whether the key can sign now, asked before any check runs: for OpenPGP, a secret key
    /// gpg lists under that name that may sign; for SSH, a private key file that can be read
    /// (the one named, or beside the public one), or an ssh-agent that holds the key.
    fn can_sign(&self) -> Result<()> {
        match self.format {
            Format::OpenPgp => self.gpg_can_sign(),
            Format::Ssh => self.ssh_can_sign(),
        }
    }

    fn gpg_can_sign(&self) -> Result<()> {
        let mut cmd = Command::new(&self.program);
        cmd.args(["--batch", "--with-colons", "--list-secret-keys", "--"])
            .arg(&self.key)
            .stdin(Stdio::null());
        let out = run(cmd, &self.program)?;
        // sec:<validity>:…, the key's usable capabilities in field 12 (upper case).
        let listing = String::from_utf8_lossy(&out.stdout);
        let usable = out.status.success()
            && listing.lines().any(|line| {
                let f: Vec<&str> = line.split(':').collect();
                f.first() == Some(&"sec")
                    && !matches!(f.get(1).copied(), Some("e" | "r" | "d" | "i"))
                    && f.get(11).is_some_and(|caps| caps.contains('S'))
            });
        if usable {
            return Ok(());
        }
        Err(Error::new(format!(
            "--attest signs with user.signingKey {:?}, and {} has no secret key by that name that can sign (missing, expired, revoked or not for signing)",
            self.key, self.program
        ))
        .hint("gpg --list-secret-keys lists the keys you can sign with: git config user.signingKey <its fingerprint>"))
    }

    fn ssh_can_sign(&self) -> Result<()> {
        let public = if is_literal_ssh_key(&self.key) {
            self.key
                .strip_prefix("key::")
                .unwrap_or(&self.key)
                .to_string()
        } else {
            let path = expand_home(&self.key);
            let text = std::fs::read(&path).unwrap_or_default();
            if text.starts_with(b"-----BEGIN") {
                // A private key file, read by the user: ssh-keygen signs with it.
                return Ok(());
            }
            let private = path
                .to_str()
                .and_then(|p| p.strip_suffix(".pub"))
                .map(PathBuf::from);
            if private.is_some_and(|p| std::fs::File::open(p).is_ok()) {
                return Ok(());
            }
            String::from_utf8_lossy(&text).trim().to_string()
        };
        if self.agent_holds(&public) {
            return Ok(());
        }
        Err(Error::new(format!(
            "--attest signs with user.signingKey {}, whose private key is neither a file beside it that can be read nor held by an ssh-agent (SSH_AUTH_SOCK)",
            self.key
        ))
        .hint("add it to your ssh-agent (ssh-add), or point user.signingKey at a key file whose private half is readable"))
    }

    /// Whether the ssh-agent of `SSH_AUTH_SOCK` holds the key whose public form is `public`.
    fn agent_holds(&self, public: &str) -> bool {
        let Some(blob) = public.split_whitespace().nth(1) else {
            return false;
        };
        if crate::env::var("SSH_AUTH_SOCK").is_none() {
            return false;
        }
        let program = match self.program.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/ssh-add"),
            None => "ssh-add".to_string(),
        };
        let mut cmd = Command::new(&program);
        cmd.arg("-L").stdin(Stdio::null());
        run(cmd, &program).is_ok_and(|out| {
            out.status.success()
                && String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| l.split_whitespace().nth(1) == Some(blob))
        })
    }

    /// Signs `message`: the signature's bytes and the key's id (SSH: its SHA256
    /// fingerprint; OpenPGP: its fingerprint).
    pub fn sign(&self, message: &[u8]) -> Result<(Vec<u8>, String)> {
        let dir = tempfile::tempdir()?;
        let msg = dir.path().join("message");
        std::fs::write(&msg, message)?;
        match self.format {
            Format::Ssh => self.sign_ssh(dir.path(), &msg),
            Format::OpenPgp => self.sign_gpg(dir.path(), &msg),
        }
    }

    fn sign_ssh(&self, dir: &Path, msg: &Path) -> Result<(Vec<u8>, String)> {
        let mut cmd = Command::new(&self.program);
        cmd.args(["-Y", "sign", "-n", NAMESPACE, "-f"]);
        if is_literal_ssh_key(&self.key) {
            let public = dir.join("key.pub");
            let text = self.key.strip_prefix("key::").unwrap_or(&self.key);
            std::fs::write(&public, format!("{text}\n"))?;
            cmd.arg(&public).arg("-U");
        } else {
            cmd.arg(expand_home(&self.key));
        }
        cmd.arg(msg).stdin(Stdio::inherit());
        let out = run(cmd, &self.program)?;
        if !out.status.success() {
            return Err(sign_failed(&self.program, &out));
        }
        let mut sig_path = msg.as_os_str().to_owned();
        sig_path.push(".sig");
        let armoured = std::fs::read(PathBuf::from(sig_path))?;
        let blob = dearmour_ssh(&armoured).ok_or_else(|| {
            Error::new(format!(
                "{} wrote a signature that is not an SSH signature",
                self.program
            ))
        })?;
        let keyid = ssh_fingerprint(&blob).unwrap_or_default();
        Ok((blob, keyid))
    }

    fn sign_gpg(&self, dir: &Path, msg: &Path) -> Result<(Vec<u8>, String)> {
        let sig = dir.join("message.sig");
        let mut cmd = Command::new(&self.program);
        cmd.args(["--status-fd=1", "--detach-sign", "--local-user"])
            .arg(&self.key)
            .arg("--output")
            .arg(&sig)
            .arg(msg)
            .stdin(Stdio::inherit());
        let out = run(cmd, &self.program)?;
        if !out.status.success() {
            return Err(sign_failed(&self.program, &out));
        }
        // SIG_CREATED <type> <pk algo> <hash algo> <class> <timestamp> <fingerprint>
        let keyid = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("[GNUPG:] SIG_CREATED "))
            .and_then(|rest| rest.split_whitespace().nth(5))
            .unwrap_or_default()
            .to_string();
        Ok((std::fs::read(&sig)?, keyid))
    }
}

/// A public key given in `user.signingKey` itself, as git reads one: `key::<key>`, or the
/// older bare `ssh-…` form.
fn is_literal_ssh_key(key: &str) -> bool {
    key.starts_with("key::") || key.starts_with("ssh-")
}

fn run(mut cmd: Command, program: &str) -> Result<Output> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.output().map_err(|e| {
        Error::new(format!("cannot run {program}: {e}"))
            .hint("install it, or name it with git config gpg.ssh.program / gpg.program")
    })
}

fn sign_failed(program: &str, out: &Output) -> Error {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut err = Error::new(format!("{program} could not sign the evidence"));
    for line in stderr.lines().filter(|l| !l.trim().is_empty()).take(6) {
        err = err.detail(line.to_string());
    }
    err.hint("check user.signingKey (and that ssh-agent or gpg-agent holds the key if it has a passphrase)")
        .exit(crate::error::Exit::Refused)
}

/// The binary SSH signature inside `-----BEGIN SSH SIGNATURE-----` armour.
fn dearmour_ssh(text: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(text).ok()?;
    let body = text
        .split("-----BEGIN SSH SIGNATURE-----")
        .nth(1)?
        .split("-----END SSH SIGNATURE-----")
        .next()?;
    let joined: String = body.split_whitespace().collect();
    let blob = super::dsse::decode(&joined).ok()?;
    blob.starts_with(SSHSIG_MAGIC).then_some(blob)
}

/// The armour `ssh-keygen` reads: base64 in lines of 70.
fn armour_ssh(blob: &[u8]) -> String {
    let b64 = super::dsse::encode(blob);
    let mut out = String::from("-----BEGIN SSH SIGNATURE-----\n");
    for chunk in b64.as_bytes().chunks(70) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END SSH SIGNATURE-----\n");
    out
}

/// The SHA256 fingerprint (as `ssh-keygen -l` prints it) of the public key inside an SSH
/// signature blob: `SSHSIG`, a version, then the key as an SSH string.
fn ssh_fingerprint(blob: &[u8]) -> Option<String> {
    let key = ssh_key_blob(blob)?;
    Some(format!(
        "SHA256:{}",
        STANDARD_NO_PAD.encode(Sha256::digest(key))
    ))
}

/// The key a signature shows it was made with, as a name for the budget of checks: an SSH
/// signature's key fingerprint, an OpenPGP signature's issuer. `None`: neither kind of
/// signature.
pub fn visible_key(sig: &[u8]) -> Option<String> {
    if sig.starts_with(SSHSIG_MAGIC) {
        return ssh_fingerprint(sig);
    }
    if sig.starts_with(b"-----BEGIN PGP SIGNATURE-----") {
        return Some("openpgp (armoured)".into());
    }
    if sig.first().is_some_and(|b| b & 0x80 != 0) {
        return Some(
            super::trust::openpgp_issuer(sig).unwrap_or_else(|| "openpgp (no issuer)".into()),
        );
    }
    None
}

/// What checking one signature found. The key id is always the one the signature was made
/// with (from the signature itself, as the checking program read it), never an envelope's
/// claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Good, by a key the verifier trusts: who signed (the allowed signers principal, the
    /// OpenPGP user id) and the key's id.
    Trusted {
        format: Format,
        signer: String,
        keyid: String,
    },
    /// Good, but by a key the verifier does not trust (or a trust it cannot read).
    Untrusted {
        format: Format,
        keyid: String,
        why: String,
    },
    /// Does not verify: the signed bytes were changed, or it is not a signature at all.
    Bad { keyid: String, why: String },
}

/// Checks `sig` over `message` against the verifier's own trust.
pub fn check(trust: &Trust, message: &[u8], sig: &[u8]) -> Checked {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            return Checked::Bad {
                keyid: String::new(),
                why: format!("cannot make a temporary folder to check it in: {e}"),
            }
        }
    };
    let msg = dir.path().join("message");
    if let Err(e) = std::fs::write(&msg, message) {
        return Checked::Bad {
            keyid: String::new(),
            why: format!("cannot write the signed bytes to check them: {e}"),
        };
    }
    if sig.starts_with(SSHSIG_MAGIC) {
        check_ssh(trust, dir.path(), &msg, sig)
    } else {
        check_gpg(trust, dir.path(), &msg, sig)
    }
}

/// One `ssh-keygen` run with the signed bytes on stdin.
fn ssh_with_message(program: &str, msg: &Path, args: &[&std::ffi::OsStr]) -> Option<Output> {
    let file = std::fs::File::open(msg).ok()?;
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(file);
    run(cmd, program).ok()
}

fn check_ssh(trust: &Trust, dir: &Path, msg: &Path, blob: &[u8]) -> Checked {
    let program = trust.ssh_program.as_str();
    let keyid = ssh_fingerprint(blob).unwrap_or_else(|| "of unknown fingerprint".into());
    let sig = dir.join("message.sig");
    if let Err(e) = std::fs::write(&sig, armour_ssh(blob)) {
        return Checked::Bad {
            keyid,
            why: format!("cannot write the signature to check it: {e}"),
        };
    }
    let allowed = match &trust.allowed {
        Ok(file) => file,
        Err(why) => {
            let why = format!("key {keyid}: {why}");
            return untrusted_or_bad(program, msg, &sig, keyid, why);
        }
    };
    let find = {
        let mut cmd = Command::new(program);
        cmd.args(["-Y", "find-principals", "-s"])
            .arg(&sig)
            .arg("-f")
            .arg(allowed)
            .stdin(Stdio::null());
        run(cmd, program).ok()
    };
    let principals: Vec<String> = find
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if principals.is_empty() {
        let why = format!("key {keyid} is not in {}", allowed.display());
        return untrusted_or_bad(program, msg, &sig, keyid, why);
    }
    for principal in &principals {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "-Y".as_ref(),
            "verify".as_ref(),
            "-f".as_ref(),
            allowed.as_os_str(),
            "-I".as_ref(),
            principal.as_ref(),
            "-n".as_ref(),
            NAMESPACE.as_ref(),
            "-s".as_ref(),
            sig.as_os_str(),
        ];
        if let Some(file) = &trust.revoked {
            args.extend(["-r".as_ref(), file.as_os_str()]);
        }
        if ssh_with_message(program, msg, &args).is_some_and(|o| o.status.success()) {
            return Checked::Trusted {
                format: Format::Ssh,
                signer: principal.clone(),
                keyid,
            };
        }
    }
    // Named, but not for this: a changed payload, or a key revoked, expired or limited to
    // other namespaces (`namespaces="git"`) in the allowed signers.
    let why = format!(
        "key {keyid} ({}) may not sign git-factory evidence now: revoked, expired, or limited to other namespaces in {}",
        principals.join(", "),
        allowed.display()
    );
    untrusted_or_bad(program, msg, &sig, keyid, why)
}

/// A signature by a key the allowed signers do not name: untrusted when it is good over the
/// message, bad when it is not even that.
fn untrusted_or_bad(program: &str, msg: &Path, sig: &Path, keyid: String, why: String) -> Checked {
    let out = ssh_with_message(
        program,
        msg,
        &[
            "-Y".as_ref(),
            "check-novalidate".as_ref(),
            "-n".as_ref(),
            NAMESPACE.as_ref(),
            "-s".as_ref(),
            sig.as_os_str(),
        ],
    );
    if out.is_some_and(|o| o.status.success()) {
        Checked::Untrusted {
            format: Format::Ssh,
            keyid,
            why,
        }
    } else {
        Checked::Bad {
            keyid,
            why: "the SSH signature does not match the envelope's payload (or is not for the git-factory namespace)".into(),
        }
    }
}

/// A user id as gpg writes it on a status line (`%XX` for a byte it escapes), as text.
fn unescape_gpg(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What gpg's status lines said about one signature.
#[derive(Default)]
struct GpgStatus {
    good: Option<String>,
    fingerprint: String,
    trust: String,
    bad: Option<String>,
    untrusted: Option<String>,
    keyid: String,
}

fn read_gpg_status(status: &str) -> GpgStatus {
    let mut s = GpgStatus {
        trust: "undefined".into(),
        ..GpgStatus::default()
    };
    for line in status.lines() {
        let Some(rest) = line.strip_prefix("[GNUPG:] ") else {
            continue;
        };
        let mut words = rest.splitn(3, ' ');
        let (tag, first, tail) = (words.next(), words.next(), words.next());
        let first = first.unwrap_or("?").to_string();
        let uid = unescape_gpg(tail.unwrap_or_default());
        match tag {
            Some("GOODSIG") => {
                s.good = Some(uid);
                s.keyid = first;
            }
            Some("VALIDSIG") => s.fingerprint = first,
            Some("BADSIG") => {
                s.bad = Some(format!(
                    "the OpenPGP signature by key {first} does not match the envelope's payload"
                ));
                s.keyid = first;
            }
            Some("NO_PUBKEY") => {
                s.untrusted = Some(format!("key {first} is not in your keyring"));
                s.keyid = first;
            }
            Some("EXPKEYSIG") => {
                s.untrusted = Some(format!("key {first} ({uid}) has expired"));
                s.keyid = first;
            }
            Some("REVKEYSIG") => {
                s.untrusted = Some(format!("key {first} ({uid}) was revoked"));
                s.keyid = first;
            }
            Some(t) if t.starts_with("TRUST_") => {
                s.trust = t["TRUST_".len()..].to_ascii_lowercase()
            }
            _ => {}
        }
    }
    if !s.fingerprint.is_empty() {
        s.keyid = s.fingerprint.clone();
    }
    s
}

fn check_gpg(trust: &Trust, dir: &Path, msg: &Path, sig: &[u8]) -> Checked {
    let program = trust.gpg_program.as_str();
    let sig_path = dir.join("message.sig");
    if let Err(e) = std::fs::write(&sig_path, sig) {
        return Checked::Bad {
            keyid: String::new(),
            why: format!("cannot write the signature to check it: {e}"),
        };
    }
    let mut cmd = Command::new(program);
    // Checking reads the keyring and writes nothing to it: no key fetched, none imported
    // from the signature, whatever the user's gpg.conf asks for.
    cmd.args([
        "--batch",
        "--no-auto-key-retrieve",
        "--no-auto-key-import",
        "--status-fd=1",
        "--verify",
    ])
    .arg(&sig_path)
    .arg(msg)
    .stdin(Stdio::null());
    let out = match run(cmd, program) {
        Ok(o) => o,
        Err(e) => {
            return Checked::Untrusted {
                format: Format::OpenPgp,
                keyid: String::new(),
                why: e.message,
            }
        }
    };
    let s = read_gpg_status(&String::from_utf8_lossy(&out.stdout));
    if let Some(why) = s.bad {
        return Checked::Bad {
            keyid: s.keyid,
            why,
        };
    }
    if let Some(why) = s.untrusted {
        return Checked::Untrusted {
            format: Format::OpenPgp,
            keyid: s.keyid,
            why,
        };
    }
    let Some(uid) = s.good.filter(|_| out.status.success()) else {
        return Checked::Bad {
            keyid: s.keyid,
            why: "not a signature gpg can check".into(),
        };
    };
    let rank = |level: &str| TRUST_LEVELS.iter().position(|l| *l == level).unwrap_or(0);
    if rank(&s.trust) < trust.min_trust {
        return Checked::Untrusted {
            format: Format::OpenPgp,
            why: format!(
                "key {} (which calls itself {uid}) has {} validity in your keyring, below {}: certify it (gpg --lsign-key) or lower gpg.minTrustLevel",
                s.keyid,
                s.trust,
                trust.min_trust_name()
            ),
            keyid: s.keyid,
        };
    }
    Checked::Trusted {
        format: Format::OpenPgp,
        signer: uid,
        keyid: s.keyid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_armour_round_trips_and_names_the_key() {
        // SSHSIG, version 1, then a key string of 3 bytes.
        let blob = b"SSHSIG\x00\x00\x00\x01\x00\x00\x00\x03abc\x00\x00\x00\x00".to_vec();
        let armoured = armour_ssh(&blob);
        assert!(armoured.starts_with("-----BEGIN SSH SIGNATURE-----\n"));
        assert_eq!(dearmour_ssh(armoured.as_bytes()), Some(blob.clone()));
        assert_eq!(
            ssh_fingerprint(&blob).expect("fingerprint"),
            format!("SHA256:{}", STANDARD_NO_PAD.encode(Sha256::digest(b"abc")))
        );
        assert_eq!(ssh_fingerprint(b"SSHSIG\x00\x00"), None);
        assert_eq!(dearmour_ssh(b"-----BEGIN PGP SIGNATURE-----"), None);
    }

    #[test]
    fn gpg_user_ids_are_read_without_their_escapes() {
        assert_eq!(unescape_gpg("Bob 100%25 <b@x>"), "Bob 100% <b@x>");
        assert_eq!(unescape_gpg("a%0Ab%"), "a\nb%");
        assert_eq!(unescape_gpg("%zz%4"), "%zz%4");
    }
}
