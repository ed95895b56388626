//! The index as the walk needs it: stage-0 entries with their cached stat data, grouped by
//! folder, parents before children.

use super::model::{IndexStamp, Time};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// One stage-0 index entry's path and cached stat data.
pub(super) struct Entry {
    pub(super) path: Vec<u8>,
    /// Where the file name starts in `path`.
    pub(super) name_at: usize,
    pub(super) mode: u32,
    pub(super) size: u32,
    pub(super) mtime: Time,
    pub(super) ctime: Time,
    pub(super) ino: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// skip-worktree (sparse checkout) or assume-unchanged: git does not look at the file.
    pub(super) skip: bool,
    /// intent-to-add: libgit2 decides what it is.
    pub(super) intent_to_add: bool,
}

impl Entry {
    pub(super) fn name(&self) -> &[u8] {
        &self.path[self.name_at..]
    }
    pub(super) fn gitlink(&self) -> bool {
        self.mode & 0o170000 == 0o160000
    }
}

/// A folder that holds index entries: its files (in name order) and sub-folders.
pub(super) struct Node {
    pub(super) rel: Vec<u8>,
    pub(super) parent: Option<usize>,
    pub(super) files: Vec<usize>,
    pub(super) subdirs: Vec<(Vec<u8>, usize)>,
}

/// The index's entries and their folders (parents always before children).
pub(super) struct Tracked {
    pub(super) entries: Vec<Entry>,
    pub(super) nodes: Vec<Node>,
}

pub(super) const MODE_GITLINK: u32 = 0o160000;

pub(super) const FLAG_VALID: u16 = 0x8000;

pub(super) const FLAG_STAGE: u16 = 0x3000;

pub(super) const EXT_INTENT_TO_ADD: u16 = 1 << 13;

pub(super) const EXT_SKIP_WORKTREE: u16 = 1 << 14;

impl Tracked {
    /// `None` when an entry is conflicted (libgit2's walk reports conflicts).
    pub(super) fn read(index: &git2::Index) -> Option<Tracked> {
        let mut entries = Vec::with_capacity(index.len());
        for e in index.iter() {
            if e.flags & FLAG_STAGE != 0 {
                return None;
            }
            let name_at = e.path.iter().rposition(|&b| b == b'/').map_or(0, |p| p + 1);
            entries.push(Entry {
                name_at,
                mode: e.mode,
                size: e.file_size,
                mtime: Time {
                    sec: i64::from(e.mtime.seconds()),
                    nsec: e.mtime.nanoseconds(),
                },
                ctime: Time {
                    sec: i64::from(e.ctime.seconds()),
                    nsec: e.ctime.nanoseconds(),
                },
                ino: e.ino,
                uid: e.uid,
                gid: e.gid,
                skip: e.flags & FLAG_VALID != 0 || e.flags_extended & EXT_SKIP_WORKTREE != 0,
                intent_to_add: e.flags_extended & EXT_INTENT_TO_ADD != 0,
                path: e.path,
            });
        }
        Some(Tracked::from_entries(entries))
    }

    /// The folders of entries in index (path) order.
    pub(super) fn from_entries(entries: Vec<Entry>) -> Tracked {
        let mut nodes = vec![Node {
            rel: Vec::new(),
            parent: None,
            files: Vec::new(),
            subdirs: Vec::new(),
        }];
        let mut by_path: HashMap<Vec<u8>, usize> = HashMap::new();
        by_path.insert(Vec::new(), 0);
        let mut last: (Vec<u8>, usize) = (Vec::new(), 0);
        for (i, e) in entries.iter().enumerate() {
            let dir = &e.path[..e.name_at.saturating_sub(1)];
            let node = if dir == last.0.as_slice() {
                last.1
            } else {
                let n = node_for(&mut nodes, &mut by_path, dir);
                last = (dir.to_vec(), n);
                n
            };
            nodes[node].files.push(i);
        }
        for n in &mut nodes {
            n.subdirs.sort();
            // Index order is path order, so a folder's files are already in name order.
        }
        Tracked { entries, nodes }
    }

    pub(super) fn file_named(&self, node: usize, name: &[u8]) -> Option<&Entry> {
        let files = &self.nodes[node].files;
        files
            .binary_search_by(|&i| self.entries[i].name().cmp(name))
            .ok()
            .map(|k| &self.entries[files[k]])
    }

    pub(super) fn subdir_named(&self, node: usize, name: &[u8]) -> bool {
        self.nodes[node]
            .subdirs
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .is_ok()
    }
}

pub(super) fn node_for(
    nodes: &mut Vec<Node>,
    by_path: &mut HashMap<Vec<u8>, usize>,
    dir: &[u8],
) -> usize {
    if let Some(&i) = by_path.get(dir) {
        return i;
    }
    let (parent_dir, name) = match dir.iter().rposition(|&b| b == b'/') {
        Some(p) => (&dir[..p], &dir[p + 1..]),
        None => (&dir[..0], dir),
    };
    let parent = node_for(nodes, by_path, parent_dir);
    let i = nodes.len();
    nodes.push(Node {
        rel: dir.to_vec(),
        parent: Some(parent),
        files: Vec::new(),
        subdirs: Vec::new(),
    });
    nodes[parent].subdirs.push((name.to_vec(), i));
    by_path.insert(dir.to_vec(), i);
    i
}

/// The index file's stamp, or `None` when it cannot be read (the fast walk then stands aside).
/// Its identity is git's own checksum trailer; an index written with `index.skipHash`
/// (`feature.manyFiles`) has zeros there, and then a hash of its bytes stands in: the
/// trailer's last bytes would be the same for many different indexes.
pub(super) fn index_stamp(index: &git2::Index) -> Option<IndexStamp> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek, SeekFrom};
    let path = index.path()?;
    let mut file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    let mut checksum = vec![0u8; 32];
    let len = meta.len().min(32);
    file.seek(SeekFrom::End(-(len as i64))).ok()?;
    checksum.truncate(len as usize);
    file.read_exact(&mut checksum).ok()?;
    // A SHA-1 trailer is the last 20 bytes; all zeros there means no hash was written.
    let trailer = &checksum[checksum.len().saturating_sub(20)..];
    if trailer.iter().all(|b| *b == 0) {
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.seek(SeekFrom::Start(0)).ok()?;
        file.read_to_end(&mut bytes).ok()?;
        checksum = Sha256::digest(&bytes).to_vec();
    }
    Some(IndexStamp {
        checksum,
        mtime: Time {
            sec: meta.mtime(),
            nsec: meta.mtime_nsec() as u32,
        },
    })
}
