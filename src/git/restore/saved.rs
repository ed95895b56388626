//! The saved state of a capture: the bytes a restore puts back that are not in git's object
//! store — the index, `.git/config`, `info/exclude` and every hook — in ONE file,
//! `<saved>/state`, written once at capture (a file created anew, never through a link) and
//! read back by every restore and by `recover` after a kill. Its change time is the capture's
//! clock mark ([`Restore::since`](super::facts::Restore::since)).
//!
//! The layout is self-describing and length-prefixed; bytes stay bytes (a hook's name need
//! not be UTF-8, a link's target is kept as it reads). All numbers are little-endian:
//!
//! ```text
//! magic    "git-factory saved state\n"          24 bytes
//! version  u32 = 1
//! section* tag: u8, length: u64, body: `length` bytes
//!   'I'  the index file's bytes (absent: there was no index)
//!   'C'  `.git/config`'s bytes (absent: it could not be read)
//!   'X'  `info/exclude`'s bytes (absent: there was none)
//!   'H'  one hook: mode u32 (0o120000 for a link), name length u32, name, then its bytes
//!        (a link's target) to the end of the body
//! end      tag 'E', length 8, body: FNV-1a 64 of every byte before this tag
//! ```
//!
//! A file that stops before its end section (a capture killed mid-write), whose check does
//! not match, that holds an unknown section or a second index, or that is not this layout at
//! all is refused with an error naming it — never read in part. The check finds damage, not
//! intent: a restore within the run uses the copy the capture kept in memory, and `recover`
//! reads the file only when its SHA-256 is the one the journal recorded at capture.
//!
//! A run from before this file kept the same bytes as separate files in the saved folder
//! (`index`, `config`, `exclude`, `hooks/<name>`); [`SavedState::load`] reads that layout too,
//! so `recover` can finish such a run.

use super::facts::HooksFact;
/// The records this file's format holds are declared with the other records, in `facts.rs`.
pub(super) use super::facts::{SavedHook, SavedState};
use crate::error::{Error, Result};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"git-factory saved state\n";
const VERSION: u32 = 1;
const FILE: &str = "state";

const INDEX: u8 = b'I';
const CONFIG: u8 = b'C';
const EXCLUDE: u8 = b'X';
const HOOK: u8 = b'H';
const END: u8 = b'E';

/// The saved-state file of the saved folder `saved`.
pub(super) fn state_path(saved: &Path) -> PathBuf {
    saved.join(FILE)
}

/// FNV-1a, 64 bits: enough to tell a damaged file from a whole one (not a seal: the file
/// lives beside the journal, where only git-factory writes).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn section(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.push(tag);
    out.extend_from_slice(&(len as u64).to_le_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
}

impl SavedState {
    /// The file's bytes, in the layout of the module doc.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            64 + self.index.as_ref().map_or(0, Vec::len)
                + self.config.as_ref().map_or(0, Vec::len)
                + self.exclude.as_ref().map_or(0, Vec::len)
                + self
                    .hooks
                    .iter()
                    .map(|h| 17 + h.name.len() + h.bytes.len())
                    .sum::<usize>(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        for (tag, bytes) in [
            (INDEX, &self.index),
            (CONFIG, &self.config),
            (EXCLUDE, &self.exclude),
        ] {
            if let Some(bytes) = bytes {
                section(&mut out, tag, &[bytes]);
            }
        }
        for h in &self.hooks {
            let name_len = (h.name.len() as u32).to_le_bytes();
            let mode = h.mode.to_le_bytes();
            section(&mut out, HOOK, &[&mode, &name_len, &h.name, &h.bytes]);
        }
        let check = fnv1a(&out).to_le_bytes();
        section(&mut out, END, &[&check]);
        out
    }

    /// Reads the layout of the module doc back; `shown` names the file in a refusal.
    pub fn decode(bytes: &[u8], shown: &Path) -> Result<Self> {
        let refuse = |why: &str| {
            Error::new(format!(
                "the saved state {} {why}, so the repository's own files (index, config, hooks) cannot be put back from it",
                shown.display()
            ))
            .hint("put the index, .git/config and the hooks back by hand if they changed, then remove the journal (journal.*.json) and this file")
        };
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| refuse("is not a saved state of git-factory"))?;
        let (version, mut rest) = take_u32(rest).ok_or_else(|| refuse("stops in its header"))?;
        if version != VERSION {
            return Err(refuse(&format!(
                "has layout version {version}, which this git-factory does not read (a newer one wrote it)"
            )));
        }
        let mut state = SavedState::default();
        loop {
            let at = bytes.len() - rest.len();
            let (&tag, after) = rest
                .split_first()
                .ok_or_else(|| refuse("stops before its end (was its capture killed?)"))?;
            let (len, after) =
                take_u64(after).ok_or_else(|| refuse("stops inside a section header"))?;
            let body = usize::try_from(len)
                .ok()
                .and_then(|len| after.get(..len))
                .ok_or_else(|| refuse("stops inside a section (was its capture killed?)"))?;
            rest = &after[body.len()..];
            match tag {
                END => {
                    let (sum, _) = take_u64(body)
                        .filter(|(_, tail)| tail.is_empty())
                        .ok_or_else(|| refuse("has a malformed end section"))?;
                    if sum != fnv1a(&bytes[..at]) {
                        return Err(refuse("is damaged (its check does not match)"));
                    }
                    if !rest.is_empty() {
                        return Err(refuse("holds bytes after its end"));
                    }
                    return Ok(state);
                }
                INDEX | CONFIG | EXCLUDE => {
                    let slot = match tag {
                        INDEX => &mut state.index,
                        CONFIG => &mut state.config,
                        _ => &mut state.exclude,
                    };
                    if slot.replace(body.to_vec()).is_some() {
                        return Err(refuse(&format!(
                            "holds a second '{}' section",
                            char::from(tag)
                        )));
                    }
                }
                HOOK => {
                    let hook = (|| {
                        let (mode, body) = take_u32(body)?;
                        let (name_len, body) = take_u32(body)?;
                        let name = body.get(..usize::try_from(name_len).ok()?)?;
                        Some(SavedHook {
                            name: name.to_vec(),
                            mode,
                            bytes: body[name.len()..].to_vec(),
                        })
                    })()
                    .ok_or_else(|| refuse("has a malformed hook section"))?;
                    state.hooks.push(hook);
                }
                other => {
                    return Err(refuse(&format!(
                        "holds a section this git-factory does not know (tag {})",
                        std::ascii::escape_default(other)
                    )))
                }
            }
        }
    }

    /// Writes the state as `<saved>/state`, a file made anew (never through a link in its
    /// place; `saved` is a folder the caller just made), and returns its change time: the
    /// kernel's clock at capture, which no process can set.
    pub fn write(&self, saved: &Path) -> Result<(Option<(i64, i64)>, String)> {
        let dir = crate::git::nofollow::open_root(saved)?;
        let bytes = self.encode();
        let digest = crate::identity::sha256_hex(&bytes);
        let create = || crate::git::nofollow::create_file_at(&dir, FILE.as_bytes(), &bytes, 0o600);
        match create() {
            // Whatever stands there (a link too) goes, and the file is made anew.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                rustix::fs::unlinkat(&dir, FILE, AtFlags::empty()).map_err(std::io::Error::from)?;
                create()?;
            }
            done => done?,
        }
        let st = rustix::fs::statat(&dir, FILE, AtFlags::SYMLINK_NOFOLLOW).ok();
        Ok((st.map(|st| (st.st_ctime, st.st_ctime_nsec as i64)), digest))
    }

    /// [`SavedState::load`], refusing a `state` file that is not the one the capture wrote
    /// (`digest`, from the journal; `None` for a run from before it was kept).
    pub fn load_checked(
        saved: &Path,
        hooks: Option<&HooksFact>,
        digest: Option<&str>,
    ) -> Result<Self> {
        let path = state_path(saved);
        if let (Some(want), Ok(bytes)) = (digest, read_nofollow(&path)) {
            if crate::identity::sha256_hex(&bytes) != want {
                return Err(Error::new(format!(
                    "the saved state {} was changed after the run's capture (it is not the file the run wrote), so the repository's own files (index, config, hooks) are not put back from it",
                    path.display()
                ))
                .hint("put the index, .git/config and the hooks back by hand if they changed, then remove the journal (journal.*.json) and this file"));
            }
            return Self::decode(&bytes, &path);
        }
        Self::load(saved, hooks)
    }

    /// The state saved in the folder `saved`: its `state` file, or the separate files a run
    /// from before it left (whose hooks are named by `hooks`, as the journal recorded them).
    pub fn load(saved: &Path, hooks: Option<&HooksFact>) -> Result<Self> {
        let path = state_path(saved);
        match read_nofollow(&path) {
            Ok(bytes) => Self::decode(&bytes, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::load_folders(saved, hooks)
                .ok_or_else(|| {
                    Error::new(format!(
                        "the saved state of this run ({}) is gone, so the repository's own files (index, config, hooks) cannot be put back",
                        path.display()
                    ))
                    .hint("put the index, .git/config and the hooks back by hand if they changed, then remove the journal (journal.*.json)")
                }),
            Err(e) => Err(Error::new(format!("cannot read the saved state {}: {e}", path.display()))),
        }
    }

    /// The layout of runs from before the one file: `index`, `config`, `exclude` and
    /// `hooks/<name>` in the saved folder. `None` when the folder holds none of them.
    fn load_folders(saved: &Path, hooks: Option<&HooksFact>) -> Option<Self> {
        let read = |rel: &Path| read_nofollow(&saved.join(rel)).ok();
        let mut state = SavedState {
            index: read(Path::new("index")),
            config: read(Path::new("config")),
            exclude: read(Path::new("exclude")),
            hooks: Vec::new(),
        };
        let hooks_dir = saved.join("hooks");
        for h in hooks.map(|h| h.files.as_slice()).unwrap_or_default() {
            let name = h.name.as_bytes();
            let path = hooks_dir.join(OsStr::from_bytes(name));
            if let Ok(bytes) = read_nofollow(&path) {
                state.hooks.push(SavedHook {
                    name: name.to_vec(),
                    mode: h.mode,
                    bytes,
                });
            }
        }
        let any = state.index.is_some()
            || state.config.is_some()
            || state.exclude.is_some()
            || !state.hooks.is_empty()
            || hooks_dir.is_dir();
        any.then_some(state)
    }

    /// The saved bytes of the hook `name`.
    pub fn hook(&self, name: &[u8]) -> Option<&SavedHook> {
        self.hooks.iter().find(|h| h.name == name)
    }
}

/// A file's bytes, opened without following a link at its last component.
fn read_nofollow(path: &Path) -> std::io::Result<Vec<u8>> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn take_u32(b: &[u8]) -> Option<(u32, &[u8])> {
    let (head, rest) = b.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), rest))
}

fn take_u64(b: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = b.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::restore::{HookFile, RelPath};

    fn sample() -> SavedState {
        SavedState {
            index: Some(Vec::new()),
            config: Some(b"[core]\n\tbare = false\n".to_vec()),
            exclude: None,
            hooks: vec![
                SavedHook {
                    name: b"pre-commit".to_vec(),
                    mode: 0o755,
                    bytes: b"#!/bin/sh\nexit 0\n".to_vec(),
                },
                SavedHook {
                    name: b"caf\xe9-hook".to_vec(),
                    mode: 0o644,
                    bytes: vec![0, 159, 146, 150, 255],
                },
                SavedHook {
                    name: b"post-checkout".to_vec(),
                    mode: 0o120000,
                    bytes: b"../../shared/\xfftarget".to_vec(),
                },
                SavedHook {
                    name: b"empty".to_vec(),
                    mode: 0o600,
                    bytes: Vec::new(),
                },
            ],
        }
    }

    #[test]
    fn a_state_comes_back_byte_for_byte() {
        let state = sample();
        let bytes = state.encode();
        let back = SavedState::decode(&bytes, Path::new("state")).expect("decodes");
        assert_eq!(back, state);
        // An empty index is not a missing one; a missing exclude stays missing.
        assert_eq!(back.index.as_deref(), Some(&[][..]));
        assert_eq!(back.exclude, None);
        assert_eq!(back.hook(b"post-checkout").map(|h| h.mode), Some(0o120000));
        assert_eq!(
            back.hook(b"caf\xe9-hook").map(|h| h.bytes.clone()),
            Some(vec![0, 159, 146, 150, 255])
        );
        let none = SavedState::default();
        let back = SavedState::decode(&none.encode(), Path::new("state")).expect("decodes");
        assert_eq!(back, none);
        assert_eq!(back.index, None, "no index is not an empty one");
    }

    #[test]
    fn a_torn_file_is_refused_at_every_length() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            let err = SavedState::decode(&bytes[..cut], Path::new("saved/state"))
                .expect_err("a torn file is refused");
            assert!(err.message.contains("saved/state"), "{}", err.message);
        }
    }

    #[test]
    fn a_damaged_or_foreign_file_is_refused() {
        let shown = Path::new("state");
        let mut bytes = sample().encode();
        let last_hook_byte = bytes.len() - 20;
        bytes[last_hook_byte] ^= 1;
        let err = SavedState::decode(&bytes, shown).expect_err("damaged");
        assert!(err.message.contains("damaged"), "{}", err.message);
        let err = SavedState::decode(b"{\"index\": 1}", shown).expect_err("foreign");
        assert!(err.message.contains("not a saved state"), "{}", err.message);
        let mut newer = sample().encode();
        newer[MAGIC.len()] = 9;
        let err = SavedState::decode(&newer, shown).expect_err("newer");
        assert!(err.message.contains("version 9"), "{}", err.message);
        // A section of a length past the end, and trailing bytes, are refused too.
        let mut long = MAGIC.to_vec();
        long.extend_from_slice(&VERSION.to_le_bytes());
        long.push(INDEX);
        long.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(SavedState::decode(&long, shown).is_err());
        let mut trailing = sample().encode();
        trailing.push(0);
        let err = SavedState::decode(&trailing, shown).expect_err("trailing");
        assert!(err.message.contains("after its end"), "{}", err.message);
        // An unknown section is named, even when the check covers it.
        let mut unknown = MAGIC.to_vec();
        unknown.extend_from_slice(&VERSION.to_le_bytes());
        section(&mut unknown, b'Z', &[b"?"]);
        let check = fnv1a(&unknown).to_le_bytes();
        section(&mut unknown, END, &[&check]);
        let err = SavedState::decode(&unknown, shown).expect_err("unknown");
        assert!(err.message.contains("does not know"), "{}", err.message);
    }

    #[test]
    fn written_once_and_read_back_and_the_old_folders_still_read() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let saved = tmp.path().join("saved-x");
        std::fs::create_dir(&saved).expect("mkdir");
        let state = sample();
        let (since, digest) = state.write(&saved).expect("written");
        assert!(since.is_some());
        assert_eq!(SavedState::load(&saved, None).expect("loads"), state);
        let checked = SavedState::load_checked(&saved, None, Some(&digest)).expect("same file");
        assert_eq!(checked, state);
        let err = SavedState::load_checked(&saved, None, Some("00")).expect_err("not the file");
        assert!(err.message.contains("was changed after"), "{}", err.message);
        // A link planted in its place is replaced, not written through.
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "mine").expect("write");
        std::fs::remove_file(saved.join("state")).expect("rm");
        std::os::unix::fs::symlink(&outside, saved.join("state")).expect("link");
        state.write(&saved).expect("written");
        assert_eq!(std::fs::read(&outside).expect("read"), b"mine");
        assert_eq!(SavedState::load(&saved, None).expect("loads"), state);

        // The layout of a run from before: one file per saved thing.
        let old = tmp.path().join("saved-old");
        std::fs::create_dir_all(old.join("hooks")).expect("mkdir");
        std::fs::write(old.join("index"), b"DIRC").expect("write");
        std::fs::write(old.join("config"), b"[core]\n").expect("write");
        std::fs::write(old.join("hooks").join(OsStr::from_bytes(b"h\xff")), b"#!").expect("w");
        let fact = HooksFact {
            dir: tmp.path().join("hooks"),
            files: vec![HookFile {
                name: RelPath::from_bytes(b"h\xff"),
                mode: 0o755,
            }],
        };
        let back = SavedState::load(&old, Some(&fact)).expect("the old layout loads");
        assert_eq!(back.index.as_deref(), Some(&b"DIRC"[..]));
        assert_eq!(back.exclude, None);
        assert_eq!(back.hook(b"h\xff").map(|h| h.mode), Some(0o755));
        // Nothing saved at all is refused, naming the file.
        let gone = tmp.path().join("saved-gone");
        let err = SavedState::load(&gone, None).expect_err("gone");
        assert!(err.message.contains("is gone"), "{}", err.message);
    }
}
