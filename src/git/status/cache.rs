//! The first walk's folder stamps, kept between runs (`.git/factory/status-cache`), so a
//! run's preflight lists again only the folders whose entries changed since the last one —
//! what git's untracked cache does, for a walk libgit2 cannot give one.
//!
//! Never stale, by the same rule a snapshot follows within a run: a folder is reused only
//! when its stamp (device, inode, mtime, ctime, mode) is the one recorded and its mtime lies
//! before the recorded walk began. The whole cache is dropped when the index is not the one
//! it was taken against (its checksum, or a hash of its bytes when git wrote none), when an
//! ignore rule outside the tree changed (`info/exclude`, the global excludes file: path and
//! stamps), or when any `.gitignore` of the tree, tracked or not, is not as recorded. A rule
//! file that is a link is stamped twice, the link and what it leads to. A sparse index, a
//! work tree elsewhere, a torn or foreign file: no cache, a full walk.
//!
//! Layout (all integers little-endian): `git-factory status cache 2\n`, then the key and
//! the folders as length-prefixed fields (see [`Writer`]), then the SHA-256 of everything
//! before it.

use super::model::{DirRecord, DirStamp, IndexStamp, Seen, Time};
use git2::Repository;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"git-factory status cache 3\n";

/// Where the cache of the repository's main work tree lives; `None` for a linked worktree
/// (pooled ones are swept between runs: their folders change every time).
fn cache_path(repo: &Repository) -> Option<PathBuf> {
    (!repo.is_worktree()).then(|| crate::git::factory_dir(repo).join("status-cache"))
}

/// Ignore-rule files by path, with their stamps (`None`: absent).
type Rules = Vec<(Vec<u8>, [Option<FileStamp>; 2])>;

/// A file's identity and times: what says it was not rewritten.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: Time,
    ctime: Time,
}

fn stamp_of(m: &std::fs::Metadata) -> FileStamp {
    FileStamp {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: Time {
            sec: m.mtime(),
            nsec: m.mtime_nsec() as u32,
        },
        ctime: Time {
            sec: m.ctime(),
            nsec: m.ctime_nsec() as u32,
        },
    }
}

/// A rule file's stamps: the name itself, and, when it is a link (a dotfile manager's), the
/// file it leads to — editing the target moves only the target's times.
fn file_stamps(path: &Path) -> [Option<FileStamp>; 2] {
    let own = std::fs::symlink_metadata(path).ok();
    let target = own
        .as_ref()
        .filter(|m| m.file_type().is_symlink())
        .and_then(|_| std::fs::metadata(path).ok());
    [own.as_ref().map(stamp_of), target.as_ref().map(stamp_of)]
}

/// The ignore rules that live outside the tree, as libgit2 finds them: `info/exclude` and
/// the global excludes file (`core.excludesFile`, else git's default under the XDG config
/// folder), each by path and stamp (absent ones too).
fn outside_rules(repo: &Repository) -> Rules {
    let mut paths = vec![repo.commondir().join("info").join("exclude")];
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path("core.excludesfile").ok());
    match configured {
        Some(p) => paths.push(p),
        None => {
            let xdg = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
            if let Some(dir) = xdg {
                paths.push(dir.join("git").join("ignore"));
            }
        }
    }
    paths
        .into_iter()
        .map(|p| {
            let stamps = file_stamps(&p);
            (p.as_os_str().as_bytes().to_vec(), stamps)
        })
        .collect()
}

/// The `.gitignore` files of the tree, with their stamps: the tracked ones (a rewrite the
/// stat check cannot see — `core.trustctime=false`, the same size and mtime — still moves its
/// change time) and the untracked ones among `dirs`' entries, ignored ones included (rules no
/// folder stamp covers when they are edited in place).
fn tree_rules(workdir: &Path, dirs: &HashMap<Vec<u8>, DirRecord>, tracked: &[Vec<u8>]) -> Rules {
    let mut paths: Vec<Vec<u8>> = tracked.to_vec();
    paths.extend(gitignores_in(dirs));
    paths.sort();
    paths.dedup();
    stamped(workdir, paths)
}

/// Each rule file of the tree (by repo-relative path) with its stamps as they are now.
fn stamped(workdir: &Path, paths: impl IntoIterator<Item = Vec<u8>>) -> Rules {
    (paths.into_iter())
        .map(|path| {
            let stamps = file_stamps(&workdir.join(super::model::os(&path)));
            (path, stamps)
        })
        .collect()
}

/// What the cache was taken against, besides the folders.
#[derive(PartialEq, Eq, Debug)]
struct Key {
    root: (u64, u64),
    /// `HOME` and `XDG_CONFIG_HOME` as they were: they choose the global excludes file.
    env: Vec<u8>,
    rules: Rules,
}

/// `None` where the global excludes file cannot be named for sure: `HOME` unset (libgit2
/// then asks the password database) or `XDG_CONFIG_HOME` set but empty (libgit2 and git
/// disagree on what that means). No cache then: a full walk.
fn key_of(repo: &Repository, workdir: &Path) -> Option<Key> {
    let home = std::env::var_os("HOME")?;
    let xdg = std::env::var_os("XDG_CONFIG_HOME");
    if xdg.as_ref().is_some_and(|x| x.is_empty()) {
        return None;
    }
    let mut env = home.as_bytes().to_vec();
    env.push(0);
    if let Some(x) = &xdg {
        env.extend_from_slice(x.as_bytes());
        env.push(0);
    }
    let root = std::fs::metadata(workdir).ok()?;
    Some(Key {
        root: (root.dev(), root.ino()),
        env,
        rules: outside_rules(repo),
    })
}

/// What the last walk of this work tree left: its snapshot and the `.gitignore` files it
/// knew of.
pub(super) struct Kept {
    pub(super) seen: Seen,
    rules: Rules,
}

impl Kept {
    /// Whether every `.gitignore` a walk built on this cache met is one the cache knew of. A
    /// new one (ignoring itself, so the tree looks clean) changes what is ignored in the
    /// folders below it, whose listings were reused: that walk is not to be trusted.
    pub(super) fn covers(&self, dirs: &HashMap<Vec<u8>, DirRecord>) -> bool {
        gitignores_in(dirs).all(|path| self.rules.iter().any(|(p, _)| *p == path))
    }
}

/// The untracked `.gitignore` files (ignored ones too) `dirs`' records name.
fn gitignores_in(dirs: &HashMap<Vec<u8>, DirRecord>) -> impl Iterator<Item = Vec<u8>> + '_ {
    dirs.iter().flat_map(|(rel, record)| {
        (record.untracked.iter().map(|(n, _)| n))
            .chain(record.ignored.iter().map(|(n, _)| n))
            .filter(|n| n.as_slice() == b".gitignore")
            .map(move |n| super::model::join(rel, n))
    })
}

/// The snapshot the last walk of this work tree left, when it still describes it: its key
/// matches and every `.gitignore` it recorded is as it was.
pub(super) fn load(repo: &Repository) -> Option<Kept> {
    let path = cache_path(repo)?;
    let workdir = repo.workdir()?;
    let bytes = std::fs::read(path).ok()?;
    let (key, seen, rules) = decode(&bytes)?;
    let now = stamped(workdir, rules.iter().map(|(path, _)| path.clone()));
    if key != key_of(repo, workdir)? || rules != now {
        return None;
    }
    let kept = Kept { seen, rules };
    // Every untracked `.gitignore` the records name was recorded with its stamps.
    kept.covers(&kept.seen.dirs).then_some(kept)
}

/// Keeps what a full or partial walk of the main work tree saw, for the next run. Nothing is
/// kept for a sparse index (a skip-worktree `.gitignore` is a rule no stamp covers).
pub(super) fn save(repo: &Repository, seen: &Seen, skips: bool, gitignores: &[Vec<u8>]) {
    let (Some(path), Some(workdir)) = (cache_path(repo), repo.workdir()) else {
        return;
    };
    if skips {
        let _ = std::fs::remove_file(path);
        return;
    }
    let Some(key) = key_of(repo, workdir) else {
        return;
    };
    let rules = tree_rules(workdir, &seen.dirs, gitignores);
    let bytes = encode(&key, seen, &rules);
    // Written in place (no new file per run), never through a link a command planted; a
    // torn write fails its checksum when read.
    let _ = crate::git::nofollow::rewrite_own(&path, &bytes);
}

/// Length-prefixed fields after [`MAGIC`].
struct Writer(Vec<u8>);

impl Writer {
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn time(&mut self, t: Time) {
        self.i64(t.sec);
        self.u64(u64::from(t.nsec));
    }
    fn file(&mut self, s: Option<FileStamp>) {
        match s {
            None => self.u64(0),
            Some(s) => {
                self.u64(1);
                self.u64(s.dev);
                self.u64(s.ino);
                self.u64(s.size);
                self.time(s.mtime);
                self.time(s.ctime);
            }
        }
    }
    fn rules(&mut self, rules: &[(Vec<u8>, [Option<FileStamp>; 2])]) {
        self.u64(rules.len() as u64);
        for (path, [own, target]) in rules {
            self.bytes(path);
            self.file(*own);
            self.file(*target);
        }
    }
}

fn encode(key: &Key, seen: &Seen, rules: &[(Vec<u8>, [Option<FileStamp>; 2])]) -> Vec<u8> {
    let mut w = Writer(MAGIC.to_vec());
    w.u64(key.root.0);
    w.u64(key.root.1);
    w.bytes(&key.env);
    w.rules(&key.rules);
    w.rules(rules);
    w.bytes(&seen.index.checksum);
    w.time(seen.index.mtime);
    w.time(seen.tick);
    let mut dirs: Vec<(&Vec<u8>, &DirRecord)> = seen.dirs.iter().collect();
    dirs.sort_by(|a, b| a.0.cmp(b.0));
    w.u64(dirs.len() as u64);
    for (rel, r) in dirs {
        w.bytes(rel);
        w.u64(r.stamp.dev);
        w.u64(r.stamp.ino);
        w.time(r.stamp.mtime);
        w.time(r.stamp.ctime);
        w.u64(u64::from(r.stamp.mode));
        w.u64(r.untracked.len() as u64);
        for (name, is_dir) in &r.untracked {
            w.bytes(name);
            w.u64(u64::from(*is_dir));
        }
        w.u64(r.ignored.len() as u64);
        for (name, ino) in &r.ignored {
            w.bytes(name);
            w.u64(*ino);
        }
    }
    let sum = Sha256::digest(&w.0);
    w.0.extend_from_slice(&sum);
    w.0
}

/// Reads fields back; every read is bounds-checked, so a torn or forged file is `None`.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A count of items each at least `min` bytes long: never more than what is left.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(min)? <= self.0.len()).then_some(n)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.count(1)?;
        Some(self.take(n)?.to_vec())
    }
    fn time(&mut self) -> Option<Time> {
        let sec = self.i64()?;
        let nsec = u32::try_from(self.u64()?).ok()?;
        Some(Time { sec, nsec })
    }
    fn file(&mut self) -> Option<Option<FileStamp>> {
        match self.u64()? {
            0 => Some(None),
            1 => Some(Some(FileStamp {
                dev: self.u64()?,
                ino: self.u64()?,
                size: self.u64()?,
                mtime: self.time()?,
                ctime: self.time()?,
            })),
            _ => None,
        }
    }
    fn rules(&mut self) -> Option<Rules> {
        let n = self.count(24)?;
        (0..n)
            .map(|_| Some((self.bytes()?, [self.file()?, self.file()?])))
            .collect()
    }
}

fn decode(bytes: &[u8]) -> Option<(Key, Seen, Rules)> {
    let body_len = bytes.len().checked_sub(32)?;
    let (body, sum) = bytes.split_at(body_len);
    if Sha256::digest(body).as_slice() != sum || !body.starts_with(MAGIC) {
        return None;
    }
    let mut r = Reader(&body[MAGIC.len()..]);
    let root = (r.u64()?, r.u64()?);
    let env = r.bytes()?;
    let key = Key {
        root,
        env,
        rules: r.rules()?,
    };
    let rules = r.rules()?;
    let index = IndexStamp {
        checksum: r.bytes()?,
        mtime: r.time()?,
    };
    let tick = r.time()?;
    let n = r.count(8)?;
    let mut dirs = HashMap::with_capacity(n);
    for _ in 0..n {
        let rel = r.bytes()?;
        let stamp = DirStamp {
            dev: r.u64()?,
            ino: r.u64()?,
            mtime: r.time()?,
            ctime: r.time()?,
            mode: u32::try_from(r.u64()?).ok()?,
        };
        let untracked = (0..r.count(16)?)
            .map(|_| Some((r.bytes()?, r.u64()? != 0)))
            .collect::<Option<Vec<_>>>()?;
        let ignored = (0..r.count(16)?)
            .map(|_| Some((r.bytes()?, r.u64()?)))
            .collect::<Option<Vec<_>>>()?;
        dirs.insert(
            rel,
            DirRecord {
                stamp,
                untracked,
                ignored,
            },
        );
    }
    if !r.0.is_empty() {
        return None;
    }
    Some((key, Seen { index, tick, dirs }, rules))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Key, Seen, Rules) {
        let t = |sec| Time { sec, nsec: 7 };
        let stamp = FileStamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: t(4),
            ctime: t(5),
        };
        let key = Key {
            root: (9, 10),
            env: b"/home/x\0".to_vec(),
            rules: vec![
                (b"/x/info/exclude".to_vec(), [Some(stamp), None]),
                (b"/g".to_vec(), [None, None]),
            ],
        };
        let mut dirs = HashMap::new();
        dirs.insert(
            b"a/\xff".to_vec(),
            DirRecord {
                stamp: DirStamp {
                    dev: 1,
                    ino: 3,
                    mtime: t(6),
                    ctime: t(7),
                    mode: 0o755,
                },
                untracked: vec![(b"build".to_vec(), true)],
                ignored: vec![(b".gitignore".to_vec(), 44), (b"x\xfe.log".to_vec(), 45)],
            },
        );
        let seen = Seen {
            index: IndexStamp {
                checksum: vec![1; 20],
                mtime: t(8),
            },
            tick: t(9),
            dirs,
        };
        (
            key,
            seen,
            vec![(b"a/\xff/.gitignore".to_vec(), [Some(stamp), Some(stamp)])],
        )
    }

    #[test]
    fn a_cache_reads_back_exactly_what_was_written() {
        let (key, seen, rules) = sample();
        let bytes = encode(&key, &seen, &rules);
        let (k, s, r) = decode(&bytes).expect("reads back");
        assert_eq!(k, key);
        assert_eq!(r, rules);
        assert_eq!(s.index, seen.index);
        assert_eq!(s.tick, seen.tick);
        let (a, b) = (
            &s.dirs[b"a/\xff".as_slice()],
            &seen.dirs[b"a/\xff".as_slice()],
        );
        assert_eq!(a.stamp, b.stamp);
        assert_eq!(a.untracked, b.untracked);
        assert_eq!(a.ignored, b.ignored);
    }

    #[test]
    fn a_torn_or_forged_cache_is_no_cache() {
        let (key, seen, rules) = sample();
        let bytes = encode(&key, &seen, &rules);
        for cut in [0, 1, MAGIC.len(), bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[MAGIC.len() + 3] ^= 1;
        assert!(
            decode(&flipped).is_none(),
            "a changed byte fails the checksum"
        );
        // A consistent checksum over a lying count is still refused, never a huge allocation.
        let mut body = bytes[..bytes.len() - 32].to_vec();
        let at = MAGIC.len() + 16;
        body[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let sum = Sha256::digest(&body);
        body.extend_from_slice(&sum);
        assert!(decode(&body).is_none());
    }
}
