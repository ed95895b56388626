//! The verifier's own trust, read once from git config before any envelope is examined: the
//! allowed signers (and revocations) for SSH, the least validity an OpenPGP key in the keyring
//! must have. Never a file the repository ships: a change under review could add its own key
//! to one.

use crate::config::Config;
use crate::error::{Error, Result};
use git2::Repository;
use std::cell::OnceCell;
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

const ALLOWED_SIGNERS: &str = "gpg.ssh.allowedSignersFile";
const REVOCATIONS: &str = "gpg.ssh.revocationFile";
const MIN_TRUST_LEVEL: &str = "gpg.minTrustLevel";

/// gpg's trust levels, lowest first, as git orders them for `gpg.minTrustLevel`.
pub const TRUST_LEVELS: [&str; 5] = ["undefined", "never", "marginal", "fully", "ultimate"];

/// The least validity an OpenPGP key needs to vouch for evidence when `gpg.minTrustLevel` is
/// not set: a key nobody the verifier trusts has certified (validity unknown or undefined) is
/// only a name it chose for itself.
pub const DEFAULT_MIN_TRUST: &str = "marginal";

/// The most of an allowed signers file read for the hint of which envelopes to check first.
const MAX_ALLOWED_BYTES: u64 = 4 * 1024 * 1024;

/// Whom the verifier trusts.
pub struct Trust {
    pub(super) ssh_program: String,
    pub(super) gpg_program: String,
    /// The allowed signers file, absolute; or why no SSH signer is trusted.
    pub(super) allowed: std::result::Result<PathBuf, String>,
    pub(super) revoked: Option<PathBuf>,
    /// The least OpenPGP validity accepted, as an index into [`TRUST_LEVELS`].
    pub(super) min_trust: usize,
    /// The base64 key blobs the allowed signers file names (a hint of which envelopes to check
    /// first; `ssh-keygen` decides).
    allowed_blobs: HashSet<String>,
    /// The fingerprints of the keyring's keys valid enough, listed when first needed (a hint,
    /// as above; `gpg --verify` decides).
    valid_fingerprints: OnceCell<Vec<String>>,
}

/// `~/` in a path-valued config key, as git expands it.
pub(super) fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), crate::env::home()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(value),
    }
}

/// `path` with `.` and `..` taken away without asking the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The least validity `gpg.minTrustLevel` asks for; a value git does not know is refused as
/// git refuses it.
fn min_trust(cfg: &Config) -> Result<usize> {
    let Some(value) = cfg.string(MIN_TRUST_LEVEL) else {
        return Ok(TRUST_LEVELS
            .iter()
            .position(|l| *l == DEFAULT_MIN_TRUST)
            .unwrap_or(TRUST_LEVELS.len() - 1));
    };
    TRUST_LEVELS
        .iter()
        .position(|l| l.eq_ignore_ascii_case(value.trim()))
        .ok_or_else(|| {
            Error::new(format!(
                "git config gpg.minTrustLevel is {value:?}, which is not a trust level (valid: {})",
                TRUST_LEVELS.join(", ")
            ))
            .hint(format!(
                "git config gpg.minTrustLevel {DEFAULT_MIN_TRUST} (or unset it: evidence then needs a key of at least {DEFAULT_MIN_TRUST} validity)"
            ))
        })
}

impl Trust {
    /// The trust of the verifier working in `repo`. Relative paths are read as git reads
    /// them, from the top of the work tree (whatever the current folder); a file inside the
    /// work tree trusts nobody.
    pub fn of(repo: &Repository) -> Result<Trust> {
        let cfg = Config::of(repo);
        let min_trust = min_trust(&cfg)?;
        let top = repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf();
        let resolve = |value: &str| {
            let p = expand_home(value);
            if p.is_absolute() {
                p
            } else {
                top.join(p)
            }
        };
        let shipped = |path: &Path| -> bool {
            let Some(work) = repo.workdir() else {
                return false;
            };
            let tops = [lexical(work), work.canonicalize().unwrap_or_default()];
            let forms = [lexical(path), path.canonicalize().unwrap_or_default()];
            forms.iter().any(|f| {
                !f.as_os_str().is_empty()
                    && tops
                        .iter()
                        .any(|t| !t.as_os_str().is_empty() && f.starts_with(t))
            })
        };
        let inside = |key: &str, value: &str, what: &str| {
            format!(
                "{key} is {value}, inside the repository, where a change could {what}: no SSH signer is trusted until it is kept outside the repository (git config {key} ~/.ssh/{})",
                if key == ALLOWED_SIGNERS { "allowed_signers" } else { "revoked_keys" }
            )
        };
        let revoked_value = cfg.string(REVOCATIONS);
        let revoked = revoked_value.as_deref().map(resolve);
        let allowed = match cfg.string(ALLOWED_SIGNERS) {
            None => Err(
                "gpg.ssh.allowedSignersFile is not set, so no SSH signer is trusted".to_string(),
            ),
            Some(v) if shipped(&resolve(&v)) => Err(inside(ALLOWED_SIGNERS, &v, "add its own key")),
            Some(_) if revoked.as_deref().is_some_and(shipped) => Err(inside(
                REVOCATIONS,
                revoked_value.as_deref().unwrap_or_default(),
                "take a revocation back",
            )),
            Some(v) => Ok(resolve(&v)),
        };
        let allowed_blobs = allowed
            .as_ref()
            .ok()
            .and_then(|p| read_capped(p))
            .map(|text| {
                text.split(|b| b.is_ascii_whitespace())
                    .filter(|w| w.len() >= 16)
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Trust {
            ssh_program: super::signature::ssh_program(&cfg),
            gpg_program: super::signature::gpg_program(&cfg),
            allowed,
            revoked,
            min_trust,
            allowed_blobs,
            valid_fingerprints: OnceCell::new(),
        })
    }

    pub(super) fn min_trust_name(&self) -> &'static str {
        TRUST_LEVELS
            .get(self.min_trust)
            .copied()
            .unwrap_or(DEFAULT_MIN_TRUST)
    }

    /// Whether the key visible in `sig` is one the verifier trusts (a hint of which envelopes
    /// to check first: the check itself is `ssh-keygen`'s or `gpg`'s).
    pub fn vouches_hint(&self, sig: &[u8]) -> bool {
        if let Some(blob) = super::signature::ssh_key_blob(sig) {
            return self.allowed_blobs.contains(&super::dsse::encode(blob));
        }
        let Some(issuer) = openpgp_issuer(sig) else {
            return false;
        };
        self.valid_fingerprints
            .get_or_init(|| self.list_valid())
            .iter()
            .any(|fpr| fpr.ends_with(&issuer))
    }

    /// The fingerprints of the keyring's keys (and subkeys) of at least the wanted validity.
    fn list_valid(&self) -> Vec<String> {
        let out = Command::new(&self.gpg_program)
            .args(["--batch", "--with-colons", "--list-keys"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let Ok(out) = out else {
            return Vec::new();
        };
        let mut valid = false;
        let mut found = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.first().copied() {
                Some("pub" | "sub") => {
                    let rank = match fields.get(1).copied() {
                        Some("u") => Some(4),
                        Some("f") => Some(3),
                        Some("m") => Some(2),
                        Some("n") => Some(1),
                        Some("e" | "r" | "i" | "d") => None,
                        _ => Some(0),
                    };
                    valid = rank.is_some_and(|r| r >= self.min_trust);
                }
                Some("fpr") if valid => {
                    if let Some(fpr) = fields.get(9).filter(|f| !f.is_empty()) {
                        found.push(fpr.to_ascii_uppercase());
                    }
                }
                _ => {}
            }
        }
        found
    }
}

fn read_capped(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_ALLOWED_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// An OpenPGP length as a packet header or a subpacket gives it (one, two or five bytes).
fn new_length(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let (&first, rest) = bytes.split_first()?;
    match first {
        0..=191 => Some((first as usize, rest)),
        192..=254 => {
            let (&second, rest) = rest.split_first()?;
            Some((((first as usize - 192) << 8) + second as usize + 192, rest))
        }
        255 => {
            let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            Some((len, rest.get(4..)?))
        }
    }
}

/// The issuer an OpenPGP v4 signature names (fingerprint, else long key id), upper-case hex:
/// only a hint of which envelopes to check first, never trusted.
pub fn openpgp_issuer(sig: &[u8]) -> Option<String> {
    let (&tag, rest) = sig.split_first()?;
    if tag & 0x80 == 0 {
        return None;
    }
    let (len, body) = if tag & 0x40 != 0 {
        if tag & 0x3f != 2 {
            return None;
        }
        new_length(rest)?
    } else {
        if (tag >> 2) & 0x0f != 2 {
            return None;
        }
        match tag & 3 {
            0 => (*rest.first()? as usize, rest.get(1..)?),
            1 => (
                u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize,
                rest.get(2..)?,
            ),
            2 => (
                u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize,
                rest.get(4..)?,
            ),
            _ => return None,
        }
    };
    let body = body.get(..len)?;
    if body.first() != Some(&4) {
        return None;
    }
    let hashed_len = u16::from_be_bytes(body.get(4..6)?.try_into().ok()?) as usize;
    let hashed = body.get(6..6 + hashed_len)?;
    let rest = body.get(6 + hashed_len..)?;
    let unhashed_len = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let unhashed = rest.get(2..2 + unhashed_len)?;
    issuer_in(hashed).or_else(|| issuer_in(unhashed))
}

fn issuer_in(mut area: &[u8]) -> Option<String> {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02X}")).collect::<String>();
    let mut keyid = None;
    while !area.is_empty() {
        let (len, rest) = new_length(area)?;
        let sub = rest.get(..len)?;
        area = rest.get(len..)?;
        let Some((&kind, data)) = sub.split_first() else {
            continue;
        };
        match kind & 0x7f {
            33 if data.len() > 1 => return data.get(1..).map(hex),
            16 if data.len() == 8 => keyid = Some(hex(data)),
            _ => {}
        }
    }
    keyid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_openpgp_signature_names_its_issuer() {
        // A v4 signature packet (new format, tag 2): version, type, algorithms, a hashed
        // area with an issuer fingerprint (33), an unhashed area with an issuer key id (16).
        let fpr: Vec<u8> = (1..=20).collect();
        let mut hashed = vec![22, 33, 4];
        hashed.extend_from_slice(&fpr);
        let mut body = vec![4, 0, 22, 8, 0, hashed.len() as u8];
        body.extend_from_slice(&hashed);
        body.extend_from_slice(&[0, 10, 9, 16, 9, 9, 9, 9, 9, 9, 9, 9]);
        let mut packet = vec![0xc2, body.len() as u8];
        packet.extend_from_slice(&body);
        assert_eq!(
            openpgp_issuer(&packet).as_deref(),
            Some("0102030405060708090A0B0C0D0E0F1011121314")
        );
        assert_eq!(openpgp_issuer(b"SSHSIG"), None);
        assert_eq!(openpgp_issuer(&packet[..10]), None);
        assert_eq!(lexical(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
    }
}
