//! The policy as data (SPEC §7.1): what a confined command may write, what stays read-only
//! inside that, what it cannot read at all, and whether it has the network. Built in one place
//! for checks and one for agents; the backends only enforce it.

use std::path::{Path, PathBuf};

/// What one confined command may do, whatever backend enforces it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Folders (or files) writable with everything below them: the tree, a private bytecode
    /// view, an agent's scratch worktree and `factory.agentWritable` folders.
    pub writable: Vec<PathBuf>,
    /// Read-only even where they lie inside a writable folder: the repo's git dirs, the
    /// tree's own `.git` entry and the git dirs it names, pre-existing ignored entries.
    pub read_only: Vec<PathBuf>,
    /// Unreadable: the verify cache's sealing key, the user's signing keys, agent sockets.
    pub hidden: Vec<PathBuf>,
    /// Checks never get the network; agents talk to their model.
    pub network: bool,
    /// The named unix sockets an agent may reach (git config `factory.agentSocket`). Empty:
    /// no unix socket can be made at all (see `process.rs`). Not empty: unix sockets can be
    /// made, and which paths they reach is the file rules' to say — under bubblewrap the
    /// hidden agent sockets stay covered, under Landlock (which cannot refuse `connect(2)` to
    /// a socket file) every socket file the agent can find is reachable: what the user
    /// accepts by naming one (README, "Confinement").
    pub agent_sockets: Vec<PathBuf>,
    /// A writable folder shown at another path, where the command then starts (bubblewrap
    /// only: an agent's scratch worktree lives under `.git/`, where some agents refuse to
    /// edit; under Landlock the agent starts in the folder itself).
    pub remap: Option<(PathBuf, PathBuf)>,
    /// The tree is a worktree the harness owns (a pooled one, an agent's scratch), whose `.git`
    /// file the pool proves before any git of the harness runs there: that file may then be
    /// saved and put back like any read-only file, where Landlock could only keep it read-only
    /// by making the tree's root read-only. Never for the user's own tree, where a `kill -9`
    /// before the put back would leave the user's next git pointed elsewhere.
    pub git_file_proven_after: bool,
}

/// Where an agent works, as the policy needs to know it.
pub struct AgentIn<'a> {
    /// The user's repository.
    pub repo: &'a git2::Repository,
    pub user_root: &'a Path,
    /// The agent's scratch worktree.
    pub scratch: &'a Path,
    /// The agent's private git dir: a copy of the scratch worktree's admin folder whose
    /// `HEAD`, `index` and logs its git writes (the harness never reads them back).
    pub git_dir: &'a Path,
    /// The agent's private object directory.
    pub objects: &'a Path,
}

/// The repository a check runs in, as the policy needs to know it.
pub struct ChecksIn<'a> {
    /// The repository opened at the tree the checks run in (a linked worktree's own).
    pub repo: &'a git2::Repository,
    pub tree: &'a Path,
    /// More read-only folders found by the caller (the tree's Python environments).
    pub also_read_only: Vec<PathBuf>,
}

impl Policy {
    /// The one policy of checks: the tree's files writable, everything under git's control
    /// and every pre-existing ignored entry read-only, secrets hidden, no network.
    pub fn for_checks(at: ChecksIn<'_>) -> Policy {
        let ChecksIn {
            repo,
            tree,
            also_read_only,
        } = at;
        let mut read_only = git_dirs(repo, tree);
        read_only.extend(ignored_entries(repo, tree));
        read_only.extend(also_read_only);
        dedup(&mut read_only);
        Policy {
            writable: vec![tree.to_path_buf()],
            read_only,
            hidden: hidden(repo),
            network: false,
            agent_sockets: Vec::new(),
            remap: None,
            git_file_proven_after: is_pooled(repo, tree),
        }
    }

    /// The one policy of agents: their scratch worktree (its `.git` file read-only), their
    /// private git dir and object directory (where their index, HEAD and commits go), the
    /// `factory.agentWritable` folders; the user's tree and repo visible but read-only —
    /// the scratch worktree's own admin folder under the common `.git` too, so an agent
    /// cannot re-point it (`commondir`, `gitdir`, `config.worktree`) for the harness or the
    /// pool's next holder; secrets hidden; the network on. `shown_at`: where the scratch
    /// worktree appears to the agent under bubblewrap.
    pub fn for_agent(at: AgentIn<'_>, agent_writable: Vec<PathBuf>, shown_at: PathBuf) -> Policy {
        let AgentIn {
            repo,
            user_root,
            scratch,
            git_dir,
            objects,
        } = at;
        let mut writable: Vec<PathBuf> = vec![
            scratch.to_path_buf(),
            git_dir.to_path_buf(),
            objects.to_path_buf(),
        ];
        writable.extend(agent_writable);
        // The user's tree is read-only whole, its ignored entries with it.
        let mut read_only = vec![user_root.to_path_buf(), repo.commondir().to_path_buf()];
        let entry = scratch.join(".git");
        if std::fs::symlink_metadata(&entry).is_ok() {
            read_only.push(entry);
        }
        Policy {
            writable,
            read_only,
            hidden: hidden(repo),
            network: true,
            agent_sockets: agent_sockets(repo),
            remap: Some((scratch.to_path_buf(), shown_at)),
            git_file_proven_after: true,
        }
    }

    /// The policy of an `--agent-command` agent: it runs in the tree the run works in and
    /// answers on stdout, so nothing of the repo is its to write — the tree and every git dir
    /// read-only; its `factory.agentWritable` folders (and its private temporary folder)
    /// writable; secrets hidden; the network on.
    pub fn for_command_agent(
        repo: &git2::Repository,
        tree: &Path,
        agent_writable: Vec<PathBuf>,
    ) -> Policy {
        let mut read_only = vec![tree.to_path_buf()];
        read_only.extend(git_dirs(repo, tree));
        dedup(&mut read_only);
        Policy {
            writable: agent_writable,
            read_only,
            hidden: hidden(repo),
            network: true,
            agent_sockets: agent_sockets(repo),
            remap: None,
            git_file_proven_after: false,
        }
    }

    /// One more writable folder (the attempt's bytecode view, the cache while the harness
    /// fills it).
    pub fn with_writable(mut self, dir: PathBuf) -> Policy {
        if !self.writable.contains(&dir) {
            self.writable.push(dir);
        }
        self
    }
}

/// git config: a unix socket an agent may connect to under `--sandbox` (multi-valued).
pub const AGENT_SOCKET_KEY: &str = "factory.agentSocket";

/// The sockets git config `factory.agentSocket` names, `~/` expanded; a relative path names
/// nothing (an agent starts in a folder of its own).
fn agent_sockets(repo: &git2::Repository) -> Vec<PathBuf> {
    let home = crate::env::home();
    let mut out: Vec<PathBuf> = (crate::config::Config::of(repo).multi(AGENT_SOCKET_KEY))
        .into_iter()
        .filter_map(|raw| match (raw.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => Some(home.join(rest)),
            _ => Some(PathBuf::from(&raw)).filter(|p| p.is_absolute()),
        })
        .collect();
    dedup(&mut out);
    out
}

/// Whether `tree` is one of the pool's worktrees (under the common dir's
/// `factory/worktrees/`), which the pool proves before it trusts them again.
fn is_pooled(repo: &git2::Repository, tree: &Path) -> bool {
    let pool = repo.commondir().join("factory").join("worktrees");
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    real(tree).starts_with(real(&pool))
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
}

/// Every git dir the tree's git can be pointed through: the common dir, the tree's own git
/// dir, the `.git` entry in the tree (a file in a linked worktree or submodule), the folders
/// that file and that git dir's `commondir` name, and each submodule's `.git` entry.
fn git_dirs(repo: &git2::Repository, tree: &Path) -> Vec<PathBuf> {
    let mut out = vec![repo.commondir().to_path_buf(), repo.path().to_path_buf()];
    let entry = tree.join(".git");
    if std::fs::symlink_metadata(&entry).is_ok() {
        out.push(entry.clone());
    }
    if let Some(named) = named_git_dir(&entry) {
        if let Some(common) = named_common_dir(&named) {
            out.push(common);
        }
        out.push(named);
    }
    if let Ok(subs) = repo.submodules() {
        for sub in subs {
            let dot_git = tree.join(sub.path()).join(".git");
            if std::fs::symlink_metadata(&dot_git).is_ok() {
                out.push(dot_git);
            }
        }
    }
    out.into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

/// The folder a `.git` file names (`gitdir: <path>`, relative to the file's folder).
fn named_git_dir(file: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    if !meta.is_file() {
        return None;
    }
    let text = std::fs::read(file).ok()?;
    let line = text.split(|b| *b == b'\n').next()?;
    let named = line.strip_prefix(b"gitdir:")?.trim_ascii();
    let named = Path::new(std::ffi::OsStr::from_bytes(named));
    Some(file.parent()?.join(named))
}

/// The folder a git dir's `commondir` file names, relative to that git dir.
fn named_common_dir(git_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read(git_dir.join("commondir")).ok()?;
    let line = text.split(|b| *b == b'\n').next()?.trim_ascii();
    Some(git_dir.join(Path::new(std::ffi::OsStr::from_bytes(line))))
}

use std::os::unix::ffi::OsStrExt;

/// The tree's ignored entries as they are now (an ignored folder as one entry): the user's
/// secrets, environments and build outputs, which no confined command may rewrite.
fn ignored_entries(repo_at_tree: &git2::Repository, tree: &Path) -> Vec<PathBuf> {
    let mut opts = git2::StatusOptions::new();
    opts.include_ignored(true)
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .recurse_ignored_dirs(false)
        .exclude_submodules(true)
        .include_unmodified(false);
    let Ok(statuses) = repo_at_tree.statuses(Some(&mut opts)) else {
        return Vec::new();
    };
    statuses
        .iter()
        .filter(|s| s.status().contains(git2::Status::IGNORED))
        .map(|s| {
            let rel = s.path_bytes();
            let rel = rel.strip_suffix(b"/").unwrap_or(rel);
            tree.join(Path::new(std::ffi::OsStr::from_bytes(rel)))
        })
        .collect()
}

/// What no confined command may read (SPEC §6.1, §7.1): the verify cache's sealing key, the
/// signing key files named by `user.signingKey`, `~/.ssh`, `~/.gnupg` and the keyring
/// `GNUPGHOME` names (the one the signer's gpg uses, as it inherits our environment), the
/// gpg agent's socket folder, and the ssh agent's socket — by its name and where that leads.
fn hidden(repo: &git2::Repository) -> Vec<PathBuf> {
    let mut out = vec![repo.commondir().join("factory").join(VERIFY_KEY)];
    let home = crate::env::home();
    if let Some(home) = &home {
        out.push(home.join(".ssh"));
        out.push(home.join(".gnupg"));
    }
    if let Some(keyring) = crate::env::var("GNUPGHOME") {
        let keyring = PathBuf::from(keyring);
        out.extend(keyring.canonicalize().ok());
        out.push(keyring);
    }
    let cfg = crate::config::Config::of(repo);
    if let Some(key) = cfg.string("user.signingKey") {
        let path = match (key.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => Some(home.join(rest)),
            _ => Some(PathBuf::from(&key)).filter(|p| p.is_absolute()),
        };
        // `user.signingKey` names the public half (`key.pub`) or the private one: both go.
        if let Some(path) = path {
            let name = path.as_os_str().as_bytes();
            let other = match name.strip_suffix(b".pub") {
                Some(private) => PathBuf::from(std::ffi::OsStr::from_bytes(private)),
                None => PathBuf::from(std::ffi::OsStr::from_bytes(&[name, b".pub"].concat())),
            };
            out.extend([path, other]);
        }
    }
    if let Some(sock) = std::env::var_os("SSH_AUTH_SOCK") {
        let sock = PathBuf::from(sock);
        // A link (`~/.ssh/agent.sock` -> `/tmp/ssh-…/agent.…`) hides nothing of its target.
        out.extend(sock.canonicalize().ok());
        out.push(sock);
    }
    let uid = rustix::process::getuid().as_raw();
    out.push(PathBuf::from(format!("/run/user/{uid}/gnupg")));
    out.retain(|p| p.is_absolute() && std::fs::symlink_metadata(p).is_ok());
    dedup(&mut out);
    // What lies in a hidden folder is hidden with it; hiding it again would mean making a
    // mount point inside the read-only empty folder that hides it, which bwrap cannot.
    let all = out.clone();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    out
}

/// The file name of the verify cache's sealing key in `.git/factory/`.
pub const VERIFY_KEY: &str = "verify-key";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_worktree_keeps_its_git_file_and_the_dirs_it_names_read_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let main = tmp.path().join("main");
        let repo = git2::Repository::init(&main).expect("init");
        let sig = git2::Signature::now("t", "t@t.invalid").expect("sig");
        let tree = repo
            .treebuilder(None)
            .and_then(|b| b.write())
            .expect("tree");
        let tree = repo.find_tree(tree).expect("tree");
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .expect("commit");
        let wt_path = tmp.path().join("wt");
        repo.worktree("wt", &wt_path, None).expect("worktree");
        let wt = git2::Repository::open(&wt_path).expect("open");
        let policy = Policy::for_checks(ChecksIn {
            repo: &wt,
            tree: &wt_path,
            also_read_only: Vec::new(),
        });
        let real = |p: PathBuf| p.canonicalize().expect("real");
        assert_eq!(policy.writable, vec![wt_path.clone()]);
        for ro in [
            real(wt_path.join(".git")),
            real(main.join(".git")),
            real(main.join(".git/worktrees/wt")),
        ] {
            assert!(policy.read_only.contains(&ro), "{ro:?} in {policy:?}");
        }
        assert!(!policy.network);
    }
}
