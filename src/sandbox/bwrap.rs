//! The bubblewrap backend: mount, pid and network namespaces. The whole file system is bound
//! read-only, the policy's writable folders writable over it, its read-only entries bound
//! read-only again over those (a single file too), `/dev/null` over each hidden file (an
//! empty folder over a hidden folder), and a private `/tmp` that `TMPDIR` names.

use super::Policy;
use std::ffi::OsString;
use std::path::Path;

/// The bwrap command line for `argv` run in `cwd` under `policy`. `status_fd`: where bwrap
/// tells that it started the command (`--json-status-fd`). Paths go in as their bytes: a
/// folder whose name is not UTF-8 is bound where it is.
/// `seccomp_fd`: where bwrap reads the seccomp program of the command (see `process.rs`).
pub fn command_line(
    policy: &Policy,
    cwd: &Path,
    argv: &[String],
    status_fd: i32,
    seccomp_fd: Option<i32>,
) -> Vec<OsString> {
    // Run by root, bwrap keeps every capability unless told: a command could then unmount
    // the read-only binds, or remount them writable.
    let mut out: Vec<OsString> = ["bwrap", "--die-with-parent", "--cap-drop", "ALL"]
        .map(OsString::from)
        .to_vec();
    if !policy.network {
        out.push("--unshare-net".into());
    }
    // Its own System V IPC: a check cannot attach the host's shared memory or write to its
    // message queues, and what it makes goes with it.
    out.push("--unshare-ipc".into());
    if let Some(fd) = seccomp_fd {
        out.extend(["--seccomp".into(), fd.to_string().into()]);
    }
    out.extend(
        [
            "--unshare-pid",
            "--new-session",
            "--json-status-fd",
            &status_fd.to_string(),
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        .map(OsString::from),
    );
    out.extend(kernel_switches_read_only());
    out.extend(["--tmpfs", "/tmp", "--setenv", "TMPDIR", "/tmp"].map(OsString::from));
    if !policy.network {
        // A check reaches no service's socket: `/run` (Docker's, D-Bus, the user's runtime
        // folder with its agents) is an empty folder of its own; so is `/var/run` where it is
        // not a link to `/run`.
        out.extend(["--tmpfs".into(), "/run".into()]);
        if std::fs::symlink_metadata("/var/run").is_ok_and(|m| m.is_dir()) {
            out.extend(["--tmpfs".into(), "/var/run".into()]);
        }
    }
    let mut bind = |flag: &str, from: &Path, to: &Path| {
        out.extend([flag.into(), from.into(), to.into()]);
    };
    // Each mount hides what was mounted below it before: outermost first, so a writable
    // worktree under the read-only `.git` stays writable, and a read-only `.git` file or
    // ignored `.env` inside the writable tree stays read-only. At equal depth, read-only last.
    // A read-only entry that is a link is not bound (a bind would follow it to its target):
    // it is saved and put back instead (see `keep.rs`), and its target stays as read-only as
    // the rest of the file system.
    let pinned = pinned_folders(policy);
    let mut mounts: Vec<(&str, &Path)> = (policy.writable.iter().map(|d| ("--bind", d.as_path())))
        .chain(pinned.iter().map(|d| ("--bind", d.as_path())))
        .chain(policy.read_only.iter().map(|d| ("--ro-bind", d.as_path())))
        .filter(|(_, d)| std::fs::symlink_metadata(d).is_ok_and(|m| !m.file_type().is_symlink()))
        .collect();
    mounts.sort_by_key(|(flag, d)| (d.components().count(), *flag == "--ro-bind"));
    mounts.dedup();
    for (flag, d) in mounts {
        bind(flag, d, d);
    }
    for h in &policy.hidden {
        match std::fs::metadata(h) {
            Ok(m) if m.is_dir() => {
                out.extend(["--tmpfs".into(), h.into(), "--remount-ro".into(), h.into()]);
            }
            Ok(_) => out.extend(["--ro-bind".into(), "/dev/null".into(), h.into()]),
            Err(_) => {}
        }
    }
    let cwd = match &policy.remap {
        Some((from, to)) => {
            out.extend(["--bind".into(), from.into(), to.into()]);
            // What is read-only inside the folder is read-only where it is shown too.
            for r in &policy.read_only {
                if let Ok(rest) = r.strip_prefix(from) {
                    if !rest.as_os_str().is_empty() && std::fs::symlink_metadata(r).is_ok() {
                        out.extend(["--ro-bind".into(), r.into(), to.join(rest).into()]);
                    }
                }
            }
            to.as_path()
        }
        None => cwd,
    };
    out.extend(["--chdir".into(), cwd.into(), "--".into()]);
    out.extend(argv.iter().map(OsString::from));
    out
}

/// What in `/proc` acts on the host's kernel rather than shows the command's own processes:
/// read-only in the sandbox (those this machine has; `/proc/sys` with what is mounted below
/// it, `binfmt_misc`).
const KERNEL_SWITCHES: [&str; 5] = [
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// The binds that make [`KERNEL_SWITCHES`] read-only over the fresh `/proc`. bwrap covers
/// some of them itself but not `/proc/sys` (a folder no one may write, so its test passes it
/// by): run by root in the host's user namespace, a command could otherwise set
/// `kernel.core_pattern`, a program the kernel runs as root on the host.
fn kernel_switches_read_only() -> Vec<OsString> {
    (KERNEL_SWITCHES.iter())
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .flat_map(|p| ["--ro-bind", p, p].map(OsString::from))
        .collect()
}

/// The folders between a writable folder and each read-only entry inside it: each is bound
/// writable onto itself, so it is a mount point the command can neither rename nor remove
/// (`EBUSY`) — a `mv src src2` would otherwise carry the read-only binds below it away with
/// the folder, and the user's ignored files with them. A folder that is read-only itself, or
/// lies in one, is never bound writable (it would open a read-only folder's inside).
fn pinned_folders(policy: &Policy) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = Vec::new();
    let read_only = |d: &Path| policy.read_only.iter().any(|q| d.starts_with(q));
    for r in &policy.read_only {
        let Some(w) = (policy.writable.iter()).find(|w| *w != r && r.starts_with(w)) else {
            continue;
        };
        let mut dir = r.parent();
        while let Some(d) = dir.filter(|d| *d != w.as_path() && d.starts_with(w)) {
            let real_folder = std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir());
            if real_folder && !read_only(d) && !out.iter().any(|o| o == d) {
                out.push(d.to_path_buf());
            }
            dir = d.parent();
        }
    }
    out
}

/// Whether bwrap failed while it set the sandbox up, after it had reported the child's pid
/// (bwrap writes `child-pid` before the child makes its mounts): its own exit status 1 with
/// no `exit-code` of the command in the status stream.
pub fn setup_failed(status: &[u8], exit_code: Option<i32>) -> bool {
    let reported = status
        .windows(b"exit-code".len())
        .any(|w| w == b"exit-code");
    exit_code == Some(1) && !reported
}

/// Whether bwrap's status stream says the command was started (its `child-pid` line).
pub fn started(status: &[u8]) -> bool {
    status
        .windows(b"child-pid".len())
        .any(|w| w == b"child-pid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folders_on_the_way_to_a_read_only_entry_are_pinned_never_inside_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tree = tmp.path().join("tree");
        for d in ["src/deep", "envs/a/py", "build"] {
            std::fs::create_dir_all(tree.join(d)).expect("mkdir");
        }
        std::fs::write(tree.join("src/deep/.env"), "s").expect("write");
        let policy = Policy {
            writable: vec![tree.clone()],
            read_only: vec![
                tree.join("src/deep/.env"),
                tree.join("envs"),
                tree.join("envs/a/py"),
                tree.join("build"),
            ],
            ..Policy::default()
        };
        let pinned = pinned_folders(&policy);
        assert_eq!(pinned, vec![tree.join("src/deep"), tree.join("src")]);
        let line = command_line(&policy, &tree, &["true".to_string()], 3, None);
        let binds: Vec<(&OsString, &OsString)> = (line.windows(2))
            .filter(|w| w[0] == "--bind")
            .map(|w| (&w[0], &w[1]))
            .collect();
        assert!(!binds
            .iter()
            .any(|(_, p)| Path::new(p).starts_with(tree.join("envs"))));
        assert!(line
            .windows(2)
            .any(|w| w[0] == "--cap-drop" && w[1] == "ALL"));
        // The kernel's settings are read-only over the fresh `/proc`, never under it.
        let at = |args: &[&str]| {
            (line.windows(args.len())).position(|w| w.iter().zip(args).all(|(a, b)| a == b))
        };
        let proc = at(&["--proc", "/proc"]).expect("a fresh /proc");
        let sys = at(&["--ro-bind", "/proc/sys", "/proc/sys"]).expect("/proc/sys read-only");
        assert!(sys > proc);
        assert!(line.iter().any(|a| a == "--unshare-ipc"));
    }
}
