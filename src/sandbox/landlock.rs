//! The Landlock backend. The crate forbids unsafe code, so a process cannot restrict a child
//! between fork and exec; instead the command is started as our own binary's hidden internal
//! subcommand ([`INTERNAL`]), which restricts itself with the rules computed here and then
//! executes the command. Landlock rules grant access to whole hierarchies and never take it
//! back below, so a read-only folder inside a writable one is made so by granting its
//! writable parent entry by entry instead ([`carve`]); a read-only file there is saved before
//! the command and put back after it (see `keep.rs`).

use super::keep::{self, real_entry};
use super::Policy;
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, ABI,
};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The hidden subcommand: `git-factory __confine [RULE PATH]… [--no-net] --filter WHO --status FILE -- ARGV…`.
/// Not a clap command, so it shows in no help, man page or completion.
pub const INTERNAL: &str = "__confine";

/// The newest ABI whose rights this code was written and tested against.
const TESTED: ABI = ABI::V7;

/// One grant: what the command may do beneath a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Read and execute everything below.
    Read,
    /// List the folder, nothing more (a folder along the way to a hidden entry).
    List,
    /// Everything below: create, remove, write, rename.
    Write,
    /// Write existing files (a device such as `/dev/null`).
    WriteFiles,
}

impl Grant {
    fn flag(self) -> &'static str {
        match self {
            Grant::Read => "--read",
            Grant::List => "--list",
            Grant::Write => "--write",
            Grant::WriteFiles => "--write-files",
        }
    }

    fn from_flag(flag: &OsStr) -> Option<Grant> {
        [Grant::Read, Grant::List, Grant::Write, Grant::WriteFiles]
            .into_iter()
            .find(|g| flag == g.flag())
    }

    fn access(self, abi: ABI) -> BitFlags<AccessFs> {
        match self {
            Grant::Read => AccessFs::from_read(abi),
            Grant::List => AccessFs::ReadDir.into(),
            Grant::Write => AccessFs::from_all(abi),
            Grant::WriteFiles => AccessFs::from_file(abi),
        }
    }
}

/// The rules for `policy`. Read-only entries inside a writable folder get no grant of their
/// own: a folder, a `.git` file, a file too big to save, or a file with other names (a hard
/// link, whose other name may lie outside the tree) is carved around, so its folder only lists and its
/// siblings are granted one by one; any other file or link is saved and put back (see
/// `keep.rs`), and is read-only outright where its folder is carved anyway.
pub struct Rules {
    pub grants: Vec<(PathBuf, Grant)>,
}

/// Devices a command writes as a matter of course. No terminal: a confined command has no
/// controlling one, and Landlock cannot give a private `/dev/pts` as bubblewrap's `--dev`
/// does, so granting the shared one would let a check write to (and read from) the user's
/// own terminal by its path. Test suites that make a pseudo-terminal need bubblewrap.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Hidden outright, never even readable: the terminals of the user's sessions.
const TERMINALS: &str = "/dev/pts";

pub fn rules(policy: &Policy, tmp: &Path) -> Rules {
    let mut grants = Vec::new();
    let mut hidden: Vec<PathBuf> = policy.hidden.iter().map(|p| real(p)).collect();
    hidden.push(PathBuf::from(TERMINALS));
    carve(
        Path::new("/"),
        &hidden,
        &[],
        (Grant::Read, Grant::List),
        &mut grants,
    );
    for w in &policy.writable {
        let w = real(w);
        let mut holes = Vec::new();
        let mut kept = Vec::new();
        for r in policy.read_only.iter().map(|p| real_entry(p)) {
            if r == w || !r.starts_with(&w) {
                continue;
            }
            match std::fs::symlink_metadata(&r) {
                Ok(m) if m.file_type().is_symlink() => kept.push(r),
                // A `.git` file names the repo git and `recover` trust: in the user's tree
                // never left writable for a put back to undo (a `kill -9` would leave it
                // hijacked); in a worktree the pool proves before trusting, it is kept like
                // any file, so the tree's root stays writable.
                Ok(m)
                    if m.is_file()
                        && m.len() <= keep::CAP
                        && m.nlink() == 1
                        && (policy.git_file_proven_after
                            || r.file_name().is_none_or(|n| n != ".git")) =>
                {
                    kept.push(r)
                }
                Ok(_) => holes.push(r),
                Err(_) => {}
            }
        }
        if policy.read_only.iter().any(|r| real(r) == w) {
            continue;
        }
        // Along the way only listing: reading is the read rules' to grant (a folder granted
        // Read here would make a hidden file below it readable again).
        carve(&w, &holes, &kept, (Grant::Write, Grant::List), &mut grants);
    }
    grants.push((real(tmp), Grant::Write));
    // No `/dev/shm`: Landlock cannot give a private one as bubblewrap's `--dev` does, and the
    // shared one holds other runs' bytecode views and whatever other programs keep there — a
    // check that could write it could plant bytecode another run's checks then import. POSIX
    // semaphores (Python's `multiprocessing` locks) are therefore not available under Landlock.
    grants.extend(
        DEVICES
            .iter()
            .map(|d| (PathBuf::from(d), Grant::WriteFiles)),
    );
    Rules { grants }
}

/// What a run says, once up front and in the brief of a check that failed for it, where
/// [`root_closed`] holds (SPEC §7.1).
pub const ROOT_CLOSED: &str = "under Landlock a check cannot create, rename or remove files \
     directly at the root of this tree (its .git lies there, and Landlock's rules cover whole \
     folders), only change existing ones in place; --worktree has no such limit, nor does the \
     bubblewrap backend (git config factory.sandboxBackend bwrap)";

/// Whether Landlock, enforcing `policy`, leaves the root of `tree` closed to new entries: a
/// read-only entry below it (the `.git` folder of a main worktree, the `.git` file of the
/// user's linked one) makes the root only listed, its entries granted one by one.
pub fn root_closed(policy: &Policy, tree: &Path) -> bool {
    let root = real(tree);
    // A private folder that cannot hold the tree, so its grant is told apart.
    let tmp = std::env::temp_dir().join(format!(".{}-never", INTERNAL));
    let Rules { grants } = rules(policy, &tmp);
    !grants
        .iter()
        .any(|(path, grant)| *grant == Grant::Write && *path != tmp && root.starts_with(path))
}

fn real(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Grants `whole` on `dir` except the `holes` below it: a folder with a hole below gets only
/// `along` itself and each of its other entries is granted in turn — except the `kept`
/// entries and every link, which get nothing of their own (a rule on a link would be a rule
/// on its target, wherever that is).
fn carve(
    dir: &Path,
    holes: &[PathBuf],
    kept: &[PathBuf],
    (whole, along): (Grant, Grant),
    out: &mut Vec<(PathBuf, Grant)>,
) {
    if holes.iter().any(|h| h == dir) {
        return;
    }
    let below: Vec<PathBuf> = holes
        .iter()
        .filter(|h| h.starts_with(dir))
        .cloned()
        .collect();
    if below.is_empty() {
        out.push((dir.to_path_buf(), whole));
        return;
    }
    out.push((dir.to_path_buf(), along));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            carve(&path, &below, kept, (whole, along), out);
        } else if !kind.is_symlink() && !below.contains(&path) && !kept.contains(&path) {
            out.push((path, whole));
        }
    }
}

/// The command line that runs `argv` confined by `rules`: our own binary's internal
/// subcommand, which writes why it could not start the command to `status`.
pub fn command_line(
    rules: &Rules,
    network: bool,
    who: super::process::Confined,
    status: &Path,
    argv: &[String],
) -> std::io::Result<Vec<OsString>> {
    let me = std::env::current_exe()?;
    let mut out: Vec<OsString> = vec![me.into(), INTERNAL.into()];
    for (path, grant) in &rules.grants {
        out.push(grant.flag().into());
        out.push(path.into());
    }
    if !network {
        out.push("--no-net".into());
    }
    out.extend(["--filter".into(), who.name().into()]);
    out.extend(["--status".into(), status.into(), "--".into()]);
    out.extend(argv.iter().map(OsString::from));
    Ok(out)
}

/// The internal subcommand: restricts this process as told, then becomes the command. Never
/// returns; why it could not start the command goes to the status file and exit code 127.
pub fn enter(args: &[OsString]) -> ! {
    let mut grants = Vec::new();
    let mut network = true;
    let mut who = None;
    let mut status: Option<std::fs::File> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_os_str();
        if a == "--" {
            i += 1;
            break;
        }
        if a == "--no-net" {
            network = false;
        } else if a == "--filter" {
            who = args
                .get(i + 1)
                .and_then(|n| n.to_str())
                .and_then(super::process::Confined::from_name);
            i += 1;
        } else if a == "--status" {
            // Opened before the restriction; closed on exec (std opens with O_CLOEXEC).
            status = args
                .get(i + 1)
                .and_then(|p| std::fs::OpenOptions::new().append(true).open(p).ok());
            i += 1;
        } else if let (Some(g), Some(p)) = (Grant::from_flag(a), args.get(i + 1)) {
            grants.push((PathBuf::from(p), g));
            i += 1;
        } else {
            fail(&mut status, &format!("unknown argument {:?}", a));
        }
        i += 1;
    }
    let argv = &args[i.min(args.len())..];
    let Some((program, rest)) = argv.split_first() else {
        fail(&mut status, "no command");
    };
    if let Err(e) = restrict(&grants, network) {
        fail(&mut status, &format!("landlock: {e}"));
    }
    let Some(who) = who else {
        fail(&mut status, "no filter named");
    };
    if let Err(e) = super::process::confine_process(who) {
        fail(&mut status, &e);
    }
    let err = std::process::Command::new(program).args(rest).exec();
    let shown = String::from_utf8_lossy(program.as_bytes()).into_owned();
    let why = match err.kind() {
        std::io::ErrorKind::NotFound => format!("exec {shown}: command not found"),
        _ => format!("exec {shown}: {err}"),
    };
    fail(&mut status, &why)
}

fn fail(status: &mut Option<std::fs::File>, why: &str) -> ! {
    match status {
        Some(f) => {
            let _ = writeln!(f, "{why}");
        }
        None => eprintln!("git-factory: {why}"),
    }
    std::process::exit(127)
}

/// Applies the rules to this process (and so to what it executes). Refuses, rather than run
/// unconfined, when the kernel enforces none of the file-system rules.
fn restrict(grants: &[(PathBuf, Grant)], network: bool) -> Result<(), String> {
    let abi = TESTED;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| e.to_string())?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| e.to_string())?;
    }
    ruleset = ruleset
        .scope(Scope::from_all(abi))
        .map_err(|e| e.to_string())?;
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    for (path, grant) in grants {
        // A path that vanished since the rules were computed, or that became a link, grants
        // nothing: a rule opened through a link would be a rule on its target.
        let Some((fd, is_dir)) = open_nofollow(path) else {
            continue;
        };
        let mut access = grant.access(abi);
        if !is_dir {
            access &= AccessFs::from_file(abi);
        }
        if access.is_empty() {
            continue;
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let status = created.restrict_self().map_err(|e| e.to_string())?;
    if status.ruleset == landlock::RulesetStatus::NotEnforced {
        return Err("this kernel does not enforce Landlock".into());
    }
    Ok(())
}

/// `path` opened as a location only (`O_PATH`), no link followed anywhere on the way (the
/// paths are real: links were resolved or left out when the rules were made); `None` for a
/// link, or a path that is gone. With whether it is a folder.
fn open_nofollow(path: &Path) -> Option<(std::os::fd::OwnedFd, bool)> {
    use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, CWD};
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat2(CWD, path, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS) {
        Err(rustix::io::Errno::NOSYS) => {
            rustix::fs::openat(CWD, path, flags, Mode::empty()).ok()?
        }
        other => other.ok()?,
    };
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd).ok()?.st_mode);
    match kind {
        FileType::Symlink => None,
        k => Some((fd, k == FileType::Directory)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_folder_inside_a_writable_one_is_carved_out() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tree = tmp.path().canonicalize().expect("real");
        for d in ["src", ".git/hooks", ".venv"] {
            std::fs::create_dir_all(tree.join(d)).expect("mkdir");
        }
        std::fs::write(tree.join("app.txt"), "x").expect("write");
        std::fs::write(tree.join(".env"), "SECRET").expect("write");
        let policy = Policy {
            writable: vec![tree.clone()],
            read_only: vec![tree.join(".git"), tree.join(".venv"), tree.join(".env")],
            ..Policy::default()
        };
        let rules = rules(&policy, Path::new("/nonexistent-tmp"));
        let grant = |p: &Path| {
            (rules.grants.iter())
                .filter(|(g, _)| g == p)
                .map(|(_, k)| *k)
                .collect::<Vec<_>>()
        };
        // The tree itself is only readable (no new entries beside .git); its other entries
        // are writable; the read-only folders get nothing, nor does the file (saved and put
        // back besides).
        assert_eq!(grant(&tree), vec![Grant::List]);
        assert_eq!(grant(&tree.join("src")), vec![Grant::Write]);
        assert_eq!(grant(&tree.join("app.txt")), vec![Grant::Write]);
        assert!(grant(&tree.join(".git")).is_empty());
        assert!(grant(&tree.join(".venv")).is_empty());
        assert!(grant(&tree.join(".env")).is_empty());
    }

    #[test]
    fn links_hard_links_and_git_files_get_no_rule_of_their_own() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("real");
        let (tree, outside) = (base.join("tree"), base.join("outside"));
        for d in [tree.join("src"), tree.join("conf"), outside.clone()] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(outside.join("real"), "x").expect("write");
        std::fs::write(tree.join(".git"), "gitdir: ../elsewhere\n").expect("write");
        std::os::unix::fs::symlink(outside.join("real"), tree.join("src/.env")).expect("link");
        std::os::unix::fs::symlink(&outside, tree.join("src/.venv")).expect("link");
        std::fs::hard_link(outside.join("real"), tree.join("conf/.env")).expect("link");
        std::fs::write(tree.join("conf/app.cfg"), "c").expect("write");
        let policy = Policy {
            writable: vec![tree.clone()],
            read_only: vec![
                tree.join(".git"),
                tree.join("src/.env"),
                tree.join("src/.venv"),
                tree.join("conf/.env"),
            ],
            ..Policy::default()
        };
        let rules = rules(&policy, &base);
        let granted = |p: &Path| rules.grants.iter().any(|(g, _)| g == p);
        // No rule names a link (it would name its target) nor anything outside the tree.
        for p in [
            tree.join("src/.env"),
            tree.join("src/.venv"),
            tree.join(".git"),
        ] {
            assert!(!granted(&p), "{p:?}");
        }
        assert!(!rules.grants.iter().any(|(g, _)| g.starts_with(&outside)));
        // The hard-linked file is carved around: its folder lists, its siblings write.
        assert!(!granted(&tree.join("conf/.env")));
        assert!(rules.grants.contains(&(tree.join("conf"), Grant::List)));
        assert!(rules
            .grants
            .contains(&(tree.join("conf/app.cfg"), Grant::Write)));
        // The folder holding only saved links stays writable whole.
        assert!(rules.grants.contains(&(tree.join("src"), Grant::Write)));
    }

    #[test]
    fn hidden_files_leave_their_folders_listable_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().canonicalize().expect("real");
        std::fs::create_dir_all(base.join("factory")).expect("mkdir");
        std::fs::write(base.join("factory/verify-key"), "k").expect("write");
        std::fs::write(base.join("factory/other"), "o").expect("write");
        let mut out = Vec::new();
        carve(
            &base,
            &[base.join("factory/verify-key")],
            &[],
            (Grant::Read, Grant::List),
            &mut out,
        );
        assert!(out.contains(&(base.join("factory"), Grant::List)));
        assert!(out.contains(&(base.join("factory/other"), Grant::Read)));
        assert!(!out
            .iter()
            .any(|(p, _)| p == &base.join("factory/verify-key")));
    }
}
