//! Confinement (SPEC §3.7, §6.1, §7.1) tried as an attacker would: what a check or an agent
//! reaches through the user's terminal, host sockets, the harness's own `/proc` entries, the
//! signing keyring, the modes inside `.git`, and processes that try to outlive their run.
//! Each confined case runs under bubblewrap, under Landlock, and under `auto` with a broken
//! bubblewrap first on `PATH`.

use crate::common::*;
use crate::sandbox::{confined_run, ways, Way};
use serde_json::Value;
use std::path::Path;

fn summary(way: Option<Way>, out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout_of(out))
        .unwrap_or_else(|_| panic!("{way:?}: {}\n{}", stderr_of(out), stdout_of(out)))
}

fn passed(way: Way, out: &std::process::Output) {
    let s = summary(Some(way), out);
    assert_eq!(s["verdict"], "PASS", "{way:?}: {s}");
    assert_eq!(
        s["attempts"][0]["acceptance"][0]["sandbox"],
        way.backend(),
        "{way:?}"
    );
}

/// `git factory run FLAGS -w WO --replay REPLAY` as a plain command (see `TestRepo::spawn`).
fn replay_std(r: &TestRepo, wo: &Path, replay: &Path, flags: &[&str]) -> std::process::Command {
    let mut cmd = r.spawn(&["run"]);
    cmd.args(flags)
        .arg("-w")
        .arg(wo)
        .arg("--replay")
        .arg(replay);
    cmd
}

/// `cmd` run under a terminal of its own (`script`), as a user's shell runs it: the terminal
/// is its controlling terminal. Its exit code, and what showed on the terminal.
fn under_a_terminal(cmd: &std::process::Command) -> (Option<i32>, String) {
    let mut line = vec![cmd.get_program().to_string_lossy().into_owned()];
    line.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    let line = shlex::try_join(line.iter().map(String::as_str)).expect("quotable");
    let mut script = std::process::Command::new("script");
    script.args(["-qefc", &line, "/dev/null"]);
    if let Some(dir) = cmd.get_current_dir() {
        script.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    script.env("SHELL", "/bin/sh");
    let out = script
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Exits 5 when the check has a terminal (`/dev/tty` opens); else, in a session it makes of
/// its own around a new terminal, tries `TIOCSTI`: exits 6 when that typed. Under Landlock no
/// pseudo-terminal can be made at all (`/dev/pts` is hidden), which passes too.
const NO_TERMINAL: &str = "python3 -c \"import os,sys,fcntl,termios\ntry:\n    os.open('/dev/tty', os.O_RDWR)\n    print('has a terminal')\n    sys.exit(5)\nexcept OSError as e:\n    print('no terminal:', e)\nif len(sys.argv) > 1: sys.exit(0)\ntry:\n    m,s=os.openpty()\nexcept OSError as e:\n    print('no pseudo-terminal either:', e)\n    sys.exit(0)\npid=os.fork()\nif pid==0:\n    os.setsid()\n    fcntl.ioctl(s, termios.TIOCSCTTY, 0)\n    try:\n        fcntl.ioctl(s, termios.TIOCSTI, b'x')\n        os._exit(6)\n    except OSError:\n        os._exit(0)\n_,st=os.waitpid(pid,0)\nsys.exit(os.waitstatus_to_exitcode(st))\"";

/// A check never gets the terminal `git factory` runs in as its controlling terminal, so it
/// cannot push a command line into its input for the user's shell to run; confined, it
/// cannot type into any terminal (`TIOCSTI` refused). Unconfined too, it has no terminal.
#[test]
fn a_check_has_no_terminal_to_type_into() {
    for way in ways() {
        let r = TestRepo::simple();
        let (wo, replay) = crate::sandbox::upper_two_order(&r, NO_TERMINAL);
        let mut cmd = replay_std(&r, &wo, &replay, &["--sandbox", "--max-attempts", "1"]);
        cmd.envs(way.env(&r));
        let (code, shown) = under_a_terminal(&cmd);
        assert_eq!(code, Some(0), "{way:?}: {shown}");
    }
    let r = TestRepo::simple();
    let unconfined = format!("{NO_TERMINAL} unconfined");
    let (wo, replay) = crate::sandbox::upper_two_order(&r, &unconfined);
    let cmd = replay_std(&r, &wo, &replay, &["--max-attempts", "1"]);
    let (code, shown) = under_a_terminal(&cmd);
    assert_eq!(code, Some(0), "unconfined: {shown}");
}

/// A check that never ends, under a terminal: its timeout still stops it (its group is its
/// session), and the run ends.
#[test]
fn a_check_in_its_own_session_still_times_out_under_a_terminal() {
    let r = TestRepo::simple();
    r.git(&["config", "factory.timeoutSeconds", "1"]);
    let (wo, replay) = crate::sandbox::upper_two_order(&r, "sh -c 'sleep 59.7 & sleep 59.7'");
    let cmd = replay_std(&r, &wo, &replay, &["--max-attempts", "1"]);
    let started = std::time::Instant::now();
    let (code, shown) = under_a_terminal(&cmd);
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{shown}"
    );
    assert!(processes_with("sleep 59.7").is_empty());
}

/// A unix socket listening at `path` until the test ends.
fn listening(path: &Path) -> std::os::unix::net::UnixListener {
    let _ = std::fs::remove_file(path);
    let l = std::os::unix::net::UnixListener::bind(path).expect("bind a unix socket");
    std::os::unix::net::UnixStream::connect(path).expect("connects unconfined");
    l
}

/// An abstract unix socket (no file), as the X server's `@/tmp/.X11-unix/X0`.
fn listening_abstract(name: &str) -> std::os::unix::net::UnixListener {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).expect("name");
    std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind an abstract socket")
}

/// An agent's script: tries each socket (`@name` abstract); exits 7 naming the first it
/// reaches when `reach` is false, 8 naming the first it cannot when true; else makes its edit.
fn agent_script(socks: &[String], reach: bool) -> String {
    let list = socks
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(",");
    let want = if reach { "True" } else { "False" };
    format!(
        "python3 -c \"import socket,sys\nfor p in [{list}]:\n    a='\\0'+p[1:] if p.startswith('@') else p\n    try:\n        s=socket.socket(socket.AF_UNIX)\n        s.connect(a)\n        ok=True\n    except OSError as e:\n        ok=False\n        print(p, e)\n    if ok != {want}:\n        print('reached' if ok else 'did not reach', p)\n        sys.exit(7 if ok else 8)\" && sed -i s/two/TWO/ app.txt"
    )
}

fn agent_run(r: &TestRepo, way: Way, script: &str) -> std::process::Output {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    r.factory()
        .envs(way.env(r))
        .args(["run", "--sandbox", "--json", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!(
            "sh -c {}",
            shlex::try_quote(script).expect("quotable")
        ))
        .output()
        .expect("runs")
}

/// A `--sandbox` agent keeps the network but reaches no host service through a unix socket —
/// a socket file in `/run` or elsewhere, an abstract one — under every backend; a socket the
/// user names in git config `factory.agentSocket` it reaches.
#[test]
fn a_sandboxed_agent_reaches_no_unix_socket_but_those_named() {
    let run_dir = tempfile::Builder::new()
        .prefix("gf-agent-sock-")
        .tempdir_in("/run")
        .expect("a folder in /run");
    let var_dir = tempfile::Builder::new()
        .prefix("gf-agent-sock-")
        .tempdir_in("/var/tmp")
        .expect("a folder in /var/tmp");
    let socks = [run_dir.path().join("s"), var_dir.path().join("s")];
    let _listeners: Vec<_> = socks.iter().map(|p| listening(p)).collect();
    let abstract_name = format!("gf-agent-{}", std::process::id());
    let _abstract = listening_abstract(&abstract_name);
    let mut targets: Vec<String> = socks.iter().map(|p| p.display().to_string()).collect();
    targets.push(format!("@{abstract_name}"));
    for way in ways() {
        let r = TestRepo::simple();
        let out = agent_run(&r, way, &agent_script(&targets, false));
        let s = summary(Some(way), &out);
        assert_eq!(s["verdict"], "PASS", "{way:?}: {}\n{s}", stderr_of(&out));
        // Named, the socket is reached.
        r.git(&["checkout", "--", "app.txt"]);
        let named = socks[1].display().to_string();
        r.git(&["config", "factory.agentSocket", &named]);
        let out = agent_run(&r, way, &agent_script(&[named], true));
        let s = summary(Some(way), &out);
        assert_eq!(s["verdict"], "PASS", "{way:?}: {}\n{s}", stderr_of(&out));
    }
}

/// A tracked script that starts a chain of `depth` processes, each in a session of its own
/// and waiting on the next; the last says it is there (a file in `$READY`) and rewrites
/// `sub/data.txt` 3 s later.
const CHAIN: &str = "n=$1\nif [ \"$n\" -gt 0 ]; then\n  setsid sh ./chain.sh $((n-1)) &\n  wait\nelse\n  touch $READY/r.$$\n  sleep 3\n  echo escaped > sub/data.txt\nfi\n";

/// A bounded fork bomb: each process starts two in sessions of their own, `depth` deep (2^8
/// processes); the leaves rewrite `sub/data.txt` after a while.
const BOMB: &str = "n=$1\nif [ \"$n\" -gt 0 ]; then\n  setsid sh ./bomb.sh $((n-1)) &\n  setsid sh ./bomb.sh $((n-1)) &\n  wait\nelse\n  touch $READY/r.$$\n  sleep 3\n  echo escaped > sub/data.txt\nfi\n";

fn chained_repo() -> TestRepo {
    let r = TestRepo::with_files(&[
        ("app.txt", "one\ntwo\nthree\n"),
        ("chain.sh", CHAIN),
        ("bomb.sh", BOMB),
        ("sub/data.txt", "data\n"),
    ]);
    r.git(&["config", "factory.verify", "true"]);
    r
}

/// A check that leaves a chain of 100 processes, each in a session of its own, or a bounded
/// fork bomb, then fails: every one of them is gone before the run is judged and rolled back,
/// so none rewrites the tree after the run returned — confined or not.
#[test]
fn no_process_a_check_left_outlives_its_run_however_deep() {
    // Each check fails once all its processes are there (the last ones said so).
    let checks = [
        "sh -c 'export READY=$(mktemp -d); setsid sh ./chain.sh 100 & until [ $(ls $READY | grep -c .) -ge 1 ]; do sleep 0.05; done; exit 1'",
        "sh -c 'export READY=$(mktemp -d); setsid sh ./bomb.sh 7 & until [ $(ls $READY | grep -c .) -ge 128 ]; do sleep 0.05; done; exit 1'",
    ];
    let mut all: Vec<Option<Way>> = ways().into_iter().map(Some).collect();
    all.push(None);
    for way in all {
        for check in checks {
            let r = chained_repo();
            let (wo, replay) = crate::sandbox::upper_two_order(&r, check);
            let mut flags = vec!["--json", "--max-attempts", "1"];
            if way.is_some() {
                flags.push("--sandbox");
            }
            let mut cmd = r.replay_command(&wo, &replay, &flags);
            if let Some(way) = way {
                cmd.envs(way.env(&r));
            }
            let out = cmd.output().expect("runs");
            let s = summary(way, &out);
            assert_eq!(s["verdict"], "FAIL", "{way:?} {check}: {s}");
            assert_eq!(
                s["attempts"][0]["acceptance"][0]["exit_code"], 1,
                "{way:?} {check}: {s}"
            );
            std::thread::sleep(std::time::Duration::from_secs(4));
            assert_eq!(
                r.read("sub/data.txt").as_deref(),
                Some("data\n"),
                "{way:?} {check}"
            );
            let left = processes_in(&r.root, true);
            assert!(left.is_empty(), "{way:?} {check}: {left:?}");
        }
    }
}

/// The keyring `GNUPGHOME` names — the one `--attest` signs with — is hidden from a sandboxed
/// check like `~/.gnupg`, under every backend.
#[test]
fn a_sandboxed_check_cannot_read_the_keyring_gnupghome_names() {
    for way in ways() {
        let r = TestRepo::simple();
        let keyring = r.outside.join("keyring");
        std::fs::create_dir_all(keyring.join("private-keys-v1.d")).expect("mkdir");
        std::fs::write(keyring.join("private-keys-v1.d/k.key"), "PRIVATE-KEY\n").expect("write");
        let check = format!(
            "sh -c '! cat {}/private-keys-v1.d/k.key'",
            keyring.display()
        );
        let out = confined_run(
            &r,
            way,
            &check,
            &[("GNUPGHOME", &keyring.to_string_lossy())],
        );
        passed(way, &out);
        assert!(!stdout_of(&out).contains("PRIVATE-KEY"), "{way:?}");
    }
}

/// What a check can `chmod 0` inside `.git` under Landlock (whose rights do not cover modes) —
/// a loose-object folder, an object, the refs, the index, a pack — gets its mode back after
/// the command, under every backend; the repo stays readable.
#[test]
fn modes_a_check_took_from_inside_git_are_put_back() {
    use std::os::unix::fs::PermissionsExt;
    for way in ways() {
        let r = TestRepo::simple();
        let head = r.git(&["rev-parse", "HEAD:app.txt"]);
        let (dir, file) = head.trim().split_at(2);
        let entries = [
            format!(".git/objects/{dir}"),
            format!(".git/objects/{dir}/{file}"),
            ".git/refs/heads".to_string(),
            ".git/refs".to_string(),
            ".git/index".to_string(),
            ".git/logs/HEAD".to_string(),
        ];
        let modes = || -> Vec<u32> {
            (entries.iter())
                .map(|p| {
                    std::fs::metadata(r.root.join(p)).map_or(0, |m| m.permissions().mode() & 0o7777)
                })
                .collect()
        };
        let before = modes();
        let list = entries.iter().rev().cloned().collect::<Vec<_>>().join(" ");
        let check = format!("sh -c 'chmod 0 {list} 2>/dev/null; true'");
        let out = confined_run(&r, way, &check, &[]);
        passed(way, &out);
        assert_eq!(modes(), before, "{way:?}");
        r.git(&["fsck", "--no-dangling"]);
    }
}

/// The harness's own objects made after a process's first confined command (the second
/// attempt's blob) are guarded as those before it: a check of attempt 2 that `chmod 0`s the
/// blob attempt 2 wrote, and its folder, leaves both as git made them.
#[test]
fn modes_of_objects_made_between_confined_commands_are_put_back() {
    use std::os::unix::fs::PermissionsExt;
    for way in ways() {
        let r = TestRepo::simple();
        let lines = ["one", "two", "three"];
        let replay = r.replay(
            "rp2",
            &[
                (
                    "1.json",
                    proposal(&diff_replace("app.txt", &lines, "two", "FIRST"), "a"),
                ),
                (
                    "2.json",
                    proposal(&diff_replace("app.txt", &lines, "two", "SECOND"), "b"),
                ),
            ],
        );
        // Attempt 1 fails; attempt 2's check takes the mode of the blob its proposal made.
        let check = "sh -c 'grep -q SECOND app.txt || exit 1; h=$(git hash-object app.txt); d=${h%??????????????????????????????????????}; chmod 0 .git/objects/$d/${h#??} .git/objects/$d; true'";
        let wo = r.work_order(basic_order(&[check]));
        let out = r
            .replay_command(
                &wo,
                &replay,
                &["--sandbox", "--json", "--max-attempts", "2"],
            )
            .envs(way.env(&r))
            .output()
            .expect("runs");
        let s = summary(Some(way), &out);
        assert_eq!(s["verdict"], "PASS", "{way:?}: {s}");
        let blob = r.git(&["hash-object", "app.txt"]);
        let (dir, file) = blob.trim().split_at(2);
        let mode = |p: &str| {
            std::fs::metadata(r.root.join(p)).map_or(0, |m| m.permissions().mode() & 0o7777)
        };
        assert_eq!(
            mode(&format!(".git/objects/{dir}/{file}")),
            0o444,
            "{way:?}"
        );
        assert_ne!(mode(&format!(".git/objects/{dir}")) & 0o700, 0, "{way:?}");
        r.git(&["cat-file", "-e", blob.trim()]);
    }
}

/// Without `--sandbox`, a check runs as the user but cannot read the API keys and
/// `SSH_AUTH_SOCK` removed from its environment out of the harness's `/proc/<pid>/environ`.
/// Run as root, the harness (and so its check) is given no capabilities, as a user's has none.
#[test]
fn an_unconfined_check_cannot_read_the_harness_environment() {
    use std::os::unix::fs::MetadataExt;
    let r = TestRepo::simple();
    let read = "python3 -c \"import os,sys\nfound=[]\nfor p in os.listdir('/proc'):\n    if not p.isdigit(): continue\n    try:\n        if b'sk-harness-secret' in open('/proc/'+p+'/environ','rb').read(): found.append(p)\n    except OSError: pass\nprint(found)\nsys.exit(9 if found else 0)\"";
    let (wo, replay) = crate::sandbox::upper_two_order(&r, read);
    let mut cmd = replay_std(&r, &wo, &replay, &["--json", "--max-attempts", "1"]);
    cmd.env("OPENAI_API_KEY", "sk-harness-secret")
        .env("SSH_AUTH_SOCK", "/tmp/sk-harness-secret.sock");
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root {
        let mut bare = std::process::Command::new("setpriv");
        bare.args(["--inh-caps=-all", "--bounding-set=-all", "--"])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            bare.current_dir(dir);
        }
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => bare.env(k, v),
                None => bare.env_remove(k),
            };
        }
        cmd = bare;
    }
    let out = cmd.output().expect("runs");
    let s = summary(None, &out);
    assert_eq!(s["verdict"], "PASS", "{s}");
}
