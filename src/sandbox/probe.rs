//! Which backend confines on this machine: `factory.sandboxBackend` names one or leaves the
//! choice to us (`auto`: bubblewrap, else Landlock), and a backend is used only after a probe
//! run inside it showed, once per process, that it cannot write outside the tree nor `.git`.

use super::{Backend, Confinement, Policy};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::OnceLock;

/// The backend chosen, and why another was passed over (for `--verbose`).
#[derive(Debug, Clone)]
pub struct Choice {
    pub backend: Backend,
    pub passed_over: Option<String>,
}

/// The backend `setting` (git config `factory.sandboxBackend`) asks for, proven to confine;
/// a refusal naming why when none does (`--sandbox` is then refused up front).
pub fn choose(setting: Option<&str>) -> Result<Choice> {
    let wanted: &[Backend] = match setting.map(str::trim) {
        None | Some("") | Some("auto") => &[Backend::Bwrap, Backend::Landlock],
        Some("bwrap") | Some("bubblewrap") => &[Backend::Bwrap],
        Some("landlock") => &[Backend::Landlock],
        Some(other) => {
            return Err(Error::new(format!(
                "git config {} {other:?}: not a sandbox backend",
                super::BACKEND_KEY
            ))
            .hint(format!(
                "git config {} auto (or bwrap, or landlock)",
                super::BACKEND_KEY
            )))
        }
    };
    let mut why = Vec::new();
    for &backend in wanted {
        match proven(backend) {
            Ok(()) => {
                return Ok(Choice {
                    backend,
                    passed_over: (!why.is_empty()).then(|| why.join("; ")),
                })
            }
            Err(e) => why.push(format!("{}: {e}", backend.name())),
        }
    }
    if let [only] = wanted {
        return Err(named_fails(*only, &why.join("; ")));
    }
    Err(
        Error::new(format!("--sandbox: no sandbox confines on this machine ({})", why.join("; ")))
            .hint("install bubblewrap (apt-get install bubblewrap) where unprivileged user namespaces are allowed, or use a kernel with Landlock (Linux 5.13 or later, enabled at boot); or run without --sandbox"),
    )
}

/// The refusal when the one backend git config names cannot confine: that backend fails and
/// why, and whether the other one would (its probe is run to say so).
fn named_fails(backend: Backend, why: &str) -> Error {
    let other = match backend {
        Backend::Bwrap => Backend::Landlock,
        Backend::Landlock => Backend::Bwrap,
    };
    let message = format!(
        "--sandbox: git config {} asks for {}, which cannot confine on this machine ({why})",
        super::BACKEND_KEY,
        backend.name()
    );
    let hint = match proven(other) {
        Ok(()) => format!(
            "{} confines here: git config {} {} (or auto, which falls back to it); or run without --sandbox",
            other.name(),
            super::BACKEND_KEY,
            other.name()
        ),
        Err(e) => format!(
            "{} does not confine here either ({}: {e}); {}",
            other.name(),
            other.name(),
            match backend {
                Backend::Bwrap => "allow unprivileged user namespaces for bwrap, or run without --sandbox",
                Backend::Landlock => "use a kernel with Landlock (Linux 5.13 or later, enabled at boot), or run without --sandbox",
            }
        ),
    };
    Error::new(message).hint(hint)
}

/// The probe's verdict on `backend`, found once per process.
fn proven(backend: Backend) -> std::result::Result<(), String> {
    static BWRAP: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    static LANDLOCK: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let cell = match backend {
        Backend::Bwrap => &BWRAP,
        Backend::Landlock => &LANDLOCK,
    };
    cell.get_or_init(|| probe(backend)).clone()
}

/// Runs a shell inside the backend, in a tree of a scratch folder with a `.git` folder in it:
/// it must be able to write the tree (a folder of it: Landlock cannot let a command add
/// entries beside a read-only `.git` folder), and must fail to write `.git` and outside it.
fn probe(backend: Backend) -> std::result::Result<(), String> {
    super::leftovers::sweep_once();
    let scratch = tempfile::Builder::new()
        .prefix(&super::leftovers::prefix(super::leftovers::PROBE))
        .tempdir()
        .map_err(|e| format!("cannot make a scratch folder: {e}"))?;
    let base = scratch.path().canonicalize().map_err(|e| e.to_string())?;
    let tree = base.join("tree");
    let git = tree.join(".git");
    let outside = base.join("outside");
    for d in [&tree.join("src"), &git, &outside] {
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    let policy = Policy {
        writable: vec![tree.clone()],
        read_only: vec![git.clone()],
        hidden: Vec::new(),
        network: false,
        agent_sockets: Vec::new(),
        remap: None,
        git_file_proven_after: false,
    };
    let confinement = Confinement::new(policy, backend);
    let script = "echo x > ../outside/f; echo x > .git/f; echo x > src/inside";
    let argv: Vec<String> = ["sh", "-c", script].map(String::from).to_vec();
    let mut prepared = confinement
        .prepare(&tree, &argv)
        .map_err(|e| e.to_string())?;
    let line = prepared.argv.clone();
    let (program, args) = line.split_first().ok_or("empty command line")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir(&tree)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in &prepared.env_set {
        cmd.env(k, v);
    }
    let output = cmd.output();
    prepared.started();
    let output = output.map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    let finished = prepared.finish(output.status.code());
    let said = String::from_utf8_lossy(&output.stderr);
    // bwrap's own complaint (e.g. `bwrap: setting up uid map: Permission denied`).
    let said = (said.lines().find(|l| l.starts_with("bwrap:")))
        .unwrap_or("")
        .trim()
        .to_string();
    if let Some(why) = finished.not_started {
        return Err(if said.is_empty() {
            why
        } else {
            format!("{why}: {said}")
        });
    }
    let wrote = |p: &Path| p.exists();
    if !wrote(&tree.join("src/inside")) {
        return Err(format!(
            "the probe could not write its own tree{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            }
        ));
    }
    if wrote(&outside.join("f")) {
        return Err("the probe wrote outside its tree".into());
    }
    if wrote(&git.join("f")) {
        return Err("the probe wrote into .git".into());
    }
    Ok(())
}
