//! What checks did on committed trees, kept in `refs/notes/factory-verify`: a note on a tree
//! id with one line per command list run on it. `git factory verify`, the pre-push hook and a
//! run's baseline check (SPEC §3.8) share it, so a tree one of them checked is not checked
//! again by another.
//!
//! - `PASS <key>`: every command of the list passed. Only passes are kept this way, so a
//!   flaky failure of a list that must pass is checked again next time.
//! - `RESULTS <key> <json>`: each command's result, pass or fail: the baseline's red tests,
//!   whose failure is the expected answer and is worth keeping.
//!
//! `<key>` is the sha256 of the command list, so another list (a changed `factory.verify`, an
//! edited contract) is another entry.
//!
//! The note is a ref anyone can write or fetch (`git fetch 'refs/notes/*:refs/notes/*'`, a
//! hand-written `git notes add`), and a forged `PASS` would let a pre-push hook pass a broken
//! tree, a forged `RESULTS` make a run `already_satisfied` without its red test ever turning
//! green. So every line carries a seal: an HMAC-SHA256, keyed with a secret that lives only in
//! this clone's `.git/factory/verify-key` (never pushed or fetched), over the tree, the kind,
//! the key and the results. A line whose seal does not check — forged, or sealed by another
//! clone — is ignored, so only what this clone's harness ran is ever believed; a line that does
//! not parse is ignored too. (Model code running unsandboxed as the user could read the secret;
//! what a command writes to refs during a check is the restore's to put back.)

use crate::error::{Error, Result};
use crate::identity::sha256_hex;
use git2::{Oid, Repository};
use serde::{de::DeserializeOwned, Serialize};
use sha2::Sha256;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;

pub const NOTES_REF: &str = "refs/notes/factory-verify";

/// The file holding this clone's sealing secret, under `.git/factory/`.
const SECRET_FILE: &str = "verify-key";

/// The key of a command list: argv words joined by US, commands by RS, hashed.
pub fn key(commands: &[Vec<String>]) -> String {
    sha256_hex(
        commands
            .iter()
            .map(|c| c.join("\u{1f}"))
            .collect::<Vec<_>>()
            .join("\u{1e}")
            .as_bytes(),
    )
}

/// HMAC-SHA256 (RFC 2104) of `message` under `secret`, in hex.
fn hmac_hex(secret: &[u8], message: &[u8]) -> String {
    use hmac::Mac;
    // HMAC takes a key of any length (a longer one is hashed first), so this never fails.
    let Ok(mut mac) = hmac::Hmac::<Sha256>::new_from_slice(secret) else {
        unreachable!("HMAC accepts keys of every length")
    };
    mac.update(message);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where the sealing secret of the repository whose common git dir is `common_dir` lives.
pub fn secret_path(common_dir: &std::path::Path) -> std::path::PathBuf {
    common_dir.join("factory").join(SECRET_FILE)
}

/// This clone's secret, made (32 bytes from the kernel, mode 0600) on first use. `None` when it
/// can be neither read nor made: then nothing is believed and nothing is recorded.
fn secret(repo: &Repository, create: bool) -> Option<Vec<u8>> {
    let path = secret_path(repo.commondir());
    if let Ok(bytes) = std::fs::read(&path) {
        return (bytes.len() >= 32).then_some(bytes);
    }
    if !create {
        return None;
    }
    let mut fresh = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut fresh))
        .ok()?;
    std::fs::create_dir_all(path.parent()?).ok()?;
    // Written whole under a name of this process's, then linked into place: a link never
    // replaces a key another process made first, and nobody ever reads a half-written key.
    static STAGED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STAGED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staged = path.with_file_name(format!("{SECRET_FILE}.{}.{n}", std::process::id()));
    let _ = std::fs::remove_file(&staged);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staged)
        .and_then(|mut f| f.write_all(&fresh).and_then(|()| f.sync_all()));
    let linked = written.and_then(|()| std::fs::hard_link(&staged, &path));
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => Some(fresh.to_vec()),
        // Another process made it first: use theirs.
        Err(_) => std::fs::read(&path).ok().filter(|b| b.len() >= 32),
    }
}

/// The seal of one entry: what it says, on which tree, under this clone's secret.
fn seal(secret: &[u8], tree: Oid, kind: &str, key: &str, body: &str) -> String {
    let message = format!("{kind}\0{tree}\0{key}\0{body}");
    hmac_hex(secret, message.as_bytes())
}

fn note_text(repo: &Repository, tree: Oid) -> Option<String> {
    repo.find_note(Some(NOTES_REF), tree)
        .ok()
        .and_then(|n| n.message().map(str::to_string))
}

/// Whether every command of `commands` is recorded, by this clone, as passing on `tree`.
pub fn passed(repo: &Repository, tree: Oid, commands: &[Vec<String>]) -> bool {
    let Some(secret) = secret(repo, false) else {
        return false;
    };
    let key = key(commands);
    let line = format!("PASS {key} {}", seal(&secret, tree, "PASS", &key, ""));
    note_text(repo, tree).is_some_and(|text| text.lines().any(|l| l == line))
}

pub fn record_pass(repo: &Repository, tree: Oid, commands: &[Vec<String>]) -> Result<()> {
    let secret = secret(repo, true).ok_or_else(no_secret)?;
    let key = key(commands);
    let line = format!("PASS {key} {}", seal(&secret, tree, "PASS", &key, ""));
    crate::store::append_note_in(repo, NOTES_REF, tree, &line)
}

/// Seals `record` (the final commit of run `run_id`) as made by a run of this clone, so a
/// cached PASS is delivered (`run --commit`/`--branch` over the cache) only when its checks
/// ran here: a record fetched from elsewhere is someone's claim, and a forged one under the
/// run_id a user's run will have (the ids are derived from public inputs) must not get a
/// change committed that no check of this clone ran.
pub fn seal_record(repo: &Repository, run_id: &str, record: Oid) -> Result<()> {
    let secret = secret(repo, true).ok_or_else(no_secret)?;
    let rel = crate::store::record_seal(run_id)
        .ok_or_else(|| Error::new(format!("{run_id:?} is not a run id")))?;
    let line = seal(&secret, record, "RECORD", run_id, "");
    let factory = repo.commondir().join("factory");
    // Never through a link a command planted in `.git/factory/`.
    crate::git::nofollow::replace_file(
        &factory,
        rel.as_bytes(),
        format!("{record} {line}\n").as_bytes(),
        0o600,
    )?;
    Ok(())
}

/// Whether `record` is the final record of run `run_id` as a run of this clone sealed it.
pub fn record_made_here(repo: &Repository, run_id: &str, record: Oid) -> bool {
    let (Some(secret), Some(rel)) = (secret(repo, false), crate::store::record_seal(run_id)) else {
        return false;
    };
    let want = format!("{record} {}", seal(&secret, record, "RECORD", run_id, ""));
    let path = repo.commondir().join("factory").join(rel);
    std::fs::read_to_string(path).is_ok_and(|text| text.trim_end() == want)
}

/// Makes this clone's sealing secret now if it does not exist yet. Called before any check
/// of any run (a run's place, `verify`, `reverify`), so the secret is there — and hidden from
/// a sandboxed command — before any command starts: none can wait for another git-factory
/// process to make it and read it then.
pub fn ensure_secret(repo: &Repository) -> Result<()> {
    secret(repo, true).map(drop).ok_or_else(no_secret)
}

fn no_secret() -> Error {
    Error::new("cannot read or create .git/factory/verify-key, which seals cached check results")
        .hint("check the permissions of .git/factory")
}

/// The per-command results recorded by this clone for `commands` on `tree` (the latest, if
/// several).
pub fn results<T: DeserializeOwned>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
) -> Option<T> {
    read_kind(repo, tree, commands, "RESULTS")
}

/// The per-test reports recorded by this clone for `commands` on `tree` (SPEC §3.9).
pub fn tests<T: DeserializeOwned>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
) -> Option<T> {
    read_kind(repo, tree, commands, "TESTS")
}

fn read_kind<T: DeserializeOwned>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
    kind: &str,
) -> Option<T> {
    let secret = secret(repo, false)?;
    let key = key(commands);
    let prefix = format!("{kind} {key} ");
    let text = note_text(repo, tree)?;
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix(&prefix)?.split_once(' '))
        .filter(|(mac, json)| *mac == seal(&secret, tree, kind, &key, json))
        .find_map(|(_, json)| serde_json::from_str(json).ok())
}

pub fn record_results<T: Serialize>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
    results: &T,
) -> Result<()> {
    record_kind(repo, tree, commands, results, "RESULTS")
}

pub fn record_tests<T: Serialize>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
    reports: &T,
) -> Result<()> {
    record_kind(repo, tree, commands, reports, "TESTS")
}

fn record_kind<T: Serialize>(
    repo: &Repository,
    tree: Oid,
    commands: &[Vec<String>],
    results: &T,
    kind: &str,
) -> Result<()> {
    let secret = secret(repo, true).ok_or_else(no_secret)?;
    // Compact JSON escapes every newline, so the record stays one line.
    let json = serde_json::to_string(results)
        .map_err(|e| Error::new(format!("cannot serialise results: {e}")))?;
    let key = key(commands);
    let mac = seal(&secret, tree, kind, &key, &json);
    let line = format!("{kind} {key} {mac} {json}");
    crate::store::append_note_in(repo, NOTES_REF, tree, &line)
}

/// A test found flaky after a change (SPEC §3.9): its id and the command that reported it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct FlakyTest {
    pub id: String,
    pub command: String,
}

/// Where flaky tests are remembered: `.git/factory/flaky.json`, shared by every worktree.
const FLAKY_FILE: &str = "flaky.json";

/// The tests this clone found flaky, sorted; none when the file is absent, a link or not ours.
pub fn flaky_tests(repo: &Repository) -> Vec<FlakyTest> {
    let path = repo.commondir().join("factory").join(FLAKY_FILE);
    let Some(mut file) = crate::git::nofollow::open_own(&path, rustix::fs::OFlags::RDONLY) else {
        return Vec::new();
    };
    let mut text = String::new();
    if file.read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    serde_json::from_str(&text).unwrap_or_default()
}

/// Adds `found` to the remembered flaky tests: sorted, without duplicates, canonical JSON,
/// written without following a link a command planted in `.git/factory/`.
pub fn remember_flaky(repo: &Repository, found: &[FlakyTest]) -> Result<()> {
    if found.is_empty() {
        return Ok(());
    }
    let mut all = flaky_tests(repo);
    all.extend(found.iter().cloned());
    all.sort();
    all.dedup();
    let value = serde_json::to_value(&all).map_err(|e| Error::new(e.to_string()))?;
    let text = crate::identity::canonical_json(&value) + "\n";
    crate::git::nofollow::replace_file(
        &repo.commondir().join("factory"),
        FLAKY_FILE.as_bytes(),
        text.as_bytes(),
        0o644,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lists_are_keyed_by_their_words_not_their_spelling() {
        let a = vec![argv(&["echo", "a b"])];
        let b = vec![argv(&["echo", "a", "b"])];
        assert_ne!(key(&a), key(&b));
        assert_eq!(key(&a), key(&[argv(&["echo", "a b"])]));
        assert_ne!(
            key(&[argv(&["x"]), argv(&["y"])]),
            key(&[argv(&["x", "y"])])
        );
    }

    #[test]
    fn passes_and_results_round_trip_and_garbage_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let mut cfg = repo.config().expect("config");
        cfg.set_str("user.name", "T").expect("set");
        cfg.set_str("user.email", "t@example.invalid").expect("set");
        let tree = repo
            .treebuilder(None)
            .and_then(|b| b.write())
            .expect("empty tree");
        let cmds = vec![argv(&["false"])];
        assert!(!passed(&repo, tree, &cmds));
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), None);
        crate::store::append_note_in(
            &repo,
            NOTES_REF,
            tree,
            &format!("RESULTS {} {{nope", key(&cmds)),
        )
        .expect("note");
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), None);
        // Lines this clone did not seal are not believed: unsealed, or sealed elsewhere.
        crate::store::append_note_in(&repo, NOTES_REF, tree, &format!("PASS {}", key(&cmds)))
            .expect("note");
        let forged = format!(
            "RESULTS {} {} [7]",
            key(&cmds),
            seal(&[9; 32], tree, "RESULTS", &key(&cmds), "[7]")
        );
        crate::store::append_note_in(&repo, NOTES_REF, tree, &forged).expect("note");
        assert!(!passed(&repo, tree, &cmds));
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), None);
        record_results(&repo, tree, &cmds, &vec![1u32, 2]).expect("record");
        record_pass(&repo, tree, &[argv(&["true"])]).expect("record");
        assert_eq!(results::<Vec<u32>>(&repo, tree, &cmds), Some(vec![1, 2]));
        assert!(passed(&repo, tree, &[argv(&["true"])]));
        assert!(!passed(&repo, tree, &cmds));
        let secret = std::fs::metadata(dir.path().join(".git/factory/verify-key")).expect("secret");
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&secret.permissions()) & 0o777,
            0o600
        );
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231 test case 2.
        assert_eq!(
            hmac_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Case 1, and case 6: a key longer than SHA-256's block is hashed first.
        assert_eq!(
            hmac_hex(&[0x0b; 20], b"Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hmac_hex(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn secrets_made_at_once_are_one_whole_secret() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().expect("tempdir");
            let _repo = Repository::init(dir.path()).expect("init");
            let seen: Vec<Option<Vec<u8>>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| s.spawn(|| secret(&Repository::open(dir.path()).expect("open"), true)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("joins"))
                    .collect()
            });
            let first = seen[0].clone().expect("a secret");
            assert_eq!(first.len(), 32);
            assert!(seen.iter().all(|s| s.as_ref() == Some(&first)), "{seen:?}");
            let leftovers: Vec<_> = std::fs::read_dir(dir.path().join(".git/factory"))
                .expect("factory dir")
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(leftovers, vec![std::ffi::OsString::from(SECRET_FILE)]);
        }
    }
}
