//! What git config and a signature's own bytes say, read without running anything: which
//! programs make and check signatures, and the key an SSH signature carries. Signing
//! (`sign.rs`) and the verifier's trust (`trust.rs`) both need these, so they live below both.

use crate::config::Config;

/// The magic an SSH signature blob starts with.
pub(super) const SSHSIG_MAGIC: &[u8] = b"SSHSIG";

pub(super) fn ssh_program(cfg: &Config) -> String {
    cfg.string("gpg.ssh.program")
        .unwrap_or_else(|| "ssh-keygen".into())
}

pub(super) fn gpg_program(cfg: &Config) -> String {
    cfg.string("gpg.openpgp.program")
        .or_else(|| cfg.string("gpg.program"))
        .unwrap_or_else(|| "gpg".into())
}

/// The public key inside an SSH signature blob, as the allowed signers file writes it (before
/// base64).
pub(super) fn ssh_key_blob(blob: &[u8]) -> Option<&[u8]> {
    let rest = blob.strip_prefix(SSHSIG_MAGIC)?.get(4..)?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    rest.get(4..4usize.checked_add(len)?)
}
