//! The walk's stat comparisons and index folders, against hand-made entries.

use super::index::{Entry, Tracked};
use super::model::{DirStamp, Time};
use super::stat::{listing_holds, unchanged, Compare, FileStat};

fn t(sec: i64, nsec: u32) -> Time {
    Time { sec, nsec }
}

fn entry(mode: u32) -> Entry {
    Entry {
        path: b"d/f".to_vec(),
        name_at: 2,
        mode,
        size: 6,
        mtime: t(100, 5),
        ctime: t(100, 7),
        ino: 42,
        uid: 1000,
        gid: 1000,
        skip: false,
        intent_to_add: false,
    }
}

fn stat_of(e: &Entry) -> FileStat {
    FileStat {
        mode: if e.mode == 0o120000 { 0o120777 } else { e.mode },
        size: u64::from(e.size),
        mtime: e.mtime,
        ctime: e.ctime,
        ino: u64::from(e.ino),
        dev: 1,
        uid: e.uid,
        gid: e.gid,
    }
}

const CMP: Compare = Compare {
    racy_from: Time { sec: 200, nsec: 0 },
    trust_ctime: true,
    full_stat: true,
};

#[test]
fn only_identical_non_racy_stat_data_means_unchanged() {
    for mode in [0o100644, 0o100755, 0o120000] {
        let e = entry(mode);
        assert!(unchanged(&e, &stat_of(&e), &CMP), "{mode:o}");
    }
    let e = entry(0o100644);
    let same = stat_of(&e);
    let changed: Vec<(&str, FileStat)> = vec![
        ("size", FileStat { size: 7, ..same }),
        (
            "mtime nanoseconds",
            FileStat {
                mtime: t(100, 6),
                ..same
            },
        ),
        (
            "ctime (mtime set back)",
            FileStat {
                ctime: t(150, 0),
                ..same
            },
        ),
        ("inode", FileStat { ino: 43, ..same }),
        ("owner", FileStat { uid: 0, ..same }),
        (
            "executable bit",
            FileStat {
                mode: 0o100755,
                ..same
            },
        ),
        (
            "now a symlink",
            FileStat {
                mode: 0o120777,
                ..same
            },
        ),
    ];
    for (what, st) in changed {
        assert!(!unchanged(&e, &st, &CMP), "{what}");
    }
    // A gitlink is never settled by stat data.
    let g = entry(0o160000);
    assert!(!unchanged(&g, &stat_of(&g), &CMP));
}

#[test]
fn racy_entries_are_never_unchanged() {
    let e = entry(0o100644);
    for racy_from in [t(100, 5), t(100, 4), t(99, 0)] {
        let cmp = Compare { racy_from, ..CMP };
        assert!(!unchanged(&e, &stat_of(&e), &cmp), "{racy_from:?}");
    }
    let cmp = Compare {
        racy_from: t(100, 6),
        ..CMP
    };
    assert!(unchanged(&e, &stat_of(&e), &cmp));
}

#[test]
fn core_trustctime_and_checkstat_minimal_relax_the_comparison() {
    let e = entry(0o100644);
    let st = FileStat {
        ctime: t(150, 0),
        ino: 7,
        ..stat_of(&e)
    };
    let relaxed = Compare {
        trust_ctime: false,
        full_stat: false,
        ..CMP
    };
    assert!(unchanged(&e, &st, &relaxed));
    assert!(!unchanged(&e, &st, &CMP));
}

#[test]
fn a_folder_listing_holds_only_for_the_same_stamp_outside_the_walk_tick() {
    let then = DirStamp {
        dev: 1,
        ino: 9,
        mtime: t(100, 500),
        ctime: t(100, 500),
        mode: 0o755,
    };
    assert!(listing_holds(&then, &then, t(100, 501)));
    // The folder changed within the walk's own tick: its stamp cannot tell.
    assert!(!listing_holds(&then, &then, t(100, 500)));
    assert!(!listing_holds(&then, &then, t(99, 0)));
    for now in [
        DirStamp {
            mtime: t(100, 501),
            ..then
        },
        DirStamp {
            ctime: t(101, 0),
            ..then
        },
        DirStamp { ino: 10, ..then },
        DirStamp { dev: 2, ..then },
    ] {
        assert!(!listing_holds(&then, &now, t(200, 0)), "{now:?}");
    }
}

#[test]
fn the_index_folders_are_built_parents_first_with_sorted_names() {
    let mut entries = Vec::new();
    for p in ["a-b/x", "a/b/c", "a/d", "a/b-c/e", "top"] {
        let mut e = entry(0o100644);
        e.name_at = p.rfind('/').map_or(0, |i| i + 1);
        e.path = p.as_bytes().to_vec();
        entries.push(e);
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let tracked = Tracked::from_entries(entries);
    for (n, node) in tracked.nodes.iter().enumerate() {
        if let Some(p) = node.parent {
            assert!(p < n);
        }
    }
    let a = tracked
        .nodes
        .iter()
        .position(|n| n.rel == b"a")
        .expect("folder a");
    let names: Vec<&[u8]> = tracked.nodes[a]
        .subdirs
        .iter()
        .map(|(n, _)| n.as_slice())
        .collect();
    assert_eq!(names, vec![&b"b"[..], b"b-c"]);
    assert!(tracked.file_named(a, b"d").is_some());
    assert!(tracked.file_named(a, b"b").is_none());
    assert!(tracked.subdir_named(a, b"b-c"));
    assert!(tracked.file_named(0, b"top").is_some());
}
