//! Confinement (SPEC §7.1) tried as an attacker would, part A: what a confined command can
//! reach besides files — the scratch worktree's admin folder, other processes, unix sockets —
//! and what the sandbox itself leaves or says. Each case runs under bubblewrap, under Landlock,
//! and under `auto` with a bubblewrap first on `PATH` that fails as Ubuntu 24.04's does.

use crate::common::*;
use crate::sandbox::{confined_run, run_asking_for_broken_bwrap, upper_two_replay, ways, Way};
use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// `git factory` confined the given way (`GIT_CONFIG_PARAMETERS` names the backend).
fn factory_in(r: &TestRepo, way: Way) -> Command {
    let mut cmd = r.factory();
    cmd.envs(way.env(r));
    cmd
}

/// `git factory run --sandbox --agent-edits 'sh -c SCRIPT'`, confined the given way; it must
/// PASS. The summary.
fn agent_passes(r: &TestRepo, way: Way, script: &str) -> Value {
    let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
    let out = factory_in(r, way)
        .args(["run", "--sandbox", "--json", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--agent-edits")
        .arg(format!(
            "sh -c {}",
            shlex::try_quote(script).expect("quotable")
        ))
        .output()
        .expect("runs");
    let s = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
    assert_eq!(
        s["verdict"],
        "PASS",
        "{way:?}: {}\n{}",
        stderr_of(&out),
        stdout_of(&out)
    );
    s
}

/// The files of every linked worktree's admin folder that name where its git looks.
fn admin_files(r: &TestRepo) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(r.root.join(".git/worktrees")) else {
        return out;
    };
    for d in dirs.flatten() {
        for f in ["commondir", "gitdir", "HEAD", "config.worktree"] {
            if let Ok(bytes) = std::fs::read(d.path().join(f)) {
                out.push((format!("{}/{f}", d.file_name().to_string_lossy()), bytes));
            }
        }
    }
    out
}

/// An agent that tries to re-point its scratch worktree — the admin folder's files under the
/// common `.git`, found through the tree's `.git` file, and that file itself — then makes its
/// change and commits it (its commit must still work).
const REPOINT: &str = "admin=$(sed -n 's/^gitdir: //p' \"$(git rev-parse --show-toplevel)/.git\"); \
     for f in commondir gitdir HEAD config.worktree; do printf evil > \"$admin/$f\" 2>/dev/null; done; \
     printf 'gitdir: /nowhere\\n' > \"$(git rev-parse --show-toplevel)/.git\" 2>/dev/null; \
     sed -i s/^two$/TWO/ app.txt && git add app.txt && \
     git -c user.name=a -c user.email=a@b.invalid commit -qm agent\n";

#[test]
fn a_sandboxed_agent_commits_but_cannot_repoint_its_worktrees_admin_folder() {
    for way in ways() {
        let r = TestRepo::simple();
        let s = agent_passes(&r, way, REPOINT);
        assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
        // The attempt records the backend that confined its agent.
        let id = s["run_id"].as_str().expect("run id");
        let apply: Value = serde_json::from_str(&r.git(&[
            "show",
            &format!("refs/factory/{id}:attempt_1/apply_result.json"),
        ]))
        .expect("apply_result.json");
        assert_eq!(apply["sandbox"], way.backend(), "{way:?}: {apply}");
        let files = admin_files(&r);
        assert!(!files.is_empty(), "{way:?}: the pool keeps its worktree");
        for (name, bytes) in files {
            assert!(
                !bytes.windows(4).any(|w| w == b"evil"),
                "{way:?}: {name} was rewritten"
            );
        }
        let (code, _) = r.git_code(&["worktree", "list"]);
        assert_eq!(code, 0);
    }
}

/// A confined run whose one proposal makes app.txt's `two` `TWO`, with `check` as its first
/// acceptance command; the harness gets `env` on top of the test's own.
fn check_run(r: &TestRepo, way: Way, check: &str, env: &[(&str, &str)]) -> Value {
    let out = confined_run(r, way, check, env);
    serde_json::from_str(&stdout_of(&out))
        .unwrap_or_else(|_| panic!("{way:?}: {}\n{}", stderr_of(&out), stdout_of(&out)))
}

fn passed(s: &Value, way: Way) {
    assert_eq!(s["verdict"], "PASS", "{way:?}: {s}");
    assert_eq!(
        s["attempts"][0]["acceptance"][0]["sandbox"],
        way.backend(),
        "{way:?}"
    );
}

/// Exits 9 when any process's environment it can read holds the harness's API key: the
/// harness's own, an ancestor's, a sibling's (the check's own has it scrubbed).
const READ_ENVIRONS: &str = "python3 -c \"import os,sys\nfound=[]\nfor p in os.listdir('/proc'):\n    if not p.isdigit(): continue\n    try:\n        if b'sk-harness-secret' in open('/proc/'+p+'/environ','rb').read(): found.append(p)\n    except OSError: pass\nprint(found)\nsys.exit(9 if found else 0)\"";

#[test]
fn a_check_cannot_read_the_harness_environment_through_proc() {
    for way in ways() {
        let r = TestRepo::simple();
        let s = check_run(
            &r,
            way,
            READ_ENVIRONS,
            &[("OPENAI_API_KEY", "sk-harness-secret")],
        );
        passed(&s, way);
    }
}

/// A unix socket listening at `path`, accepting in the background until the test ends.
fn listening(path: &std::path::Path) -> std::os::unix::net::UnixListener {
    let _ = std::fs::remove_file(path);
    let l = std::os::unix::net::UnixListener::bind(path).expect("bind a unix socket");
    // It really is reachable from outside the sandbox.
    std::os::unix::net::UnixStream::connect(path).expect("connects unconfined");
    l
}

#[test]
fn a_check_cannot_connect_to_a_unix_socket_outside_the_tree() {
    // One where services keep theirs (`/run`), one in a folder bubblewrap shows read-only.
    let run_dir = tempfile::Builder::new()
        .prefix("gf-sock-")
        .tempdir_in("/run")
        .expect("a folder in /run");
    let var_dir = tempfile::Builder::new()
        .prefix("gf-sock-")
        .tempdir_in("/var/tmp")
        .expect("a folder in /var/tmp");
    let socks = [run_dir.path().join("s"), var_dir.path().join("s")];
    let _listeners: Vec<_> = socks.iter().map(|p| listening(p)).collect();
    let targets = socks
        .iter()
        .map(|p| format!("'{}'", p.display()))
        .collect::<Vec<_>>()
        .join(",");
    // Exits 0 only when no socket can be reached.
    let check = format!(
        "python3 -c \"import socket,sys\nfor p in [{targets}]:\n    try:\n        s=socket.socket(socket.AF_UNIX)\n        s.connect(p)\n    except OSError:\n        continue\n    print('reached', p)\n    sys.exit(7)\""
    );
    for way in ways() {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, &check, &[]), way);
    }
}

#[test]
fn a_check_still_gets_socket_pairs_pipes_and_multiprocessing() {
    let pairs = "python3 -c \"import socket, subprocess\na,b=socket.socketpair()\na.sendall(b'x')\nassert b.recv(1)==b'x'\nassert subprocess.run(['true']).returncode==0\"";
    // Python's multiprocessing needs POSIX semaphores in a private /dev/shm: bubblewrap's.
    let pool = "python3 -c \"import multiprocessing as m\nwith m.Pool(2) as p:\n    assert p.map(abs,[-1,-2])==[1,2]\nq=m.Queue()\nq.put(3)\nassert q.get()==3\"";
    for way in ways() {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, pairs, &[]), way);
        if way == Way::Bwrap {
            let r = TestRepo::simple();
            passed(&check_run(&r, way, pool, &[]), way);
        }
    }
}

/// Under Landlock the machine's shared `/dev/shm` is not writable: it holds other runs'
/// bytecode views, where a check could plant bytecode another run's checks then import.
#[test]
fn a_landlock_check_cannot_write_the_shared_dev_shm() {
    let name = format!("git-factory-test-shm-{}", std::process::id());
    let target = Path::new("/dev/shm").join(&name);
    let check = format!("sh -c 'echo planted > /dev/shm/{name}; true'");
    for way in ways().into_iter().filter(|w| *w != Way::Bwrap) {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, &check, &[]), way);
        let planted = target.exists();
        let _ = std::fs::remove_file(&target);
        assert!(!planted, "{way:?}: a check wrote the shared /dev/shm");
    }
}

#[test]
fn a_check_gets_no_udp_either() {
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    listener
        .set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .expect("timeout");
    let port = listener.local_addr().expect("addr").port();
    let check = format!(
        "python3 -c \"import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))\nexcept OSError:\n    pass\""
    );
    for way in ways() {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, &check, &[]), way);
        let mut buf = [0u8; 16];
        assert!(
            listener.recv_from(&mut buf).is_err(),
            "{way:?}: a datagram left the sandbox"
        );
    }
}

#[test]
fn a_broken_bwrap_asked_for_by_name_is_refused_saying_it_fails_and_that_landlock_would_work() {
    let r = TestRepo::simple();
    let out = run_asking_for_broken_bwrap(&r);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let said = stderr_of(&out);
    assert!(!said.contains("no sandbox confines"), "{said}");
    assert!(
        said.contains("asks for bwrap, which cannot confine"),
        "{said}"
    );
    assert!(
        said.contains("setting up uid map: Permission denied"),
        "{said}"
    );
    assert!(
        said.contains("landlock confines here: git config factory.sandboxBackend landlock"),
        "{said}"
    );
    assert!(r.run_ids().is_empty());
}

#[test]
fn a_killed_harness_leaves_no_private_tmpdir_after_the_next_run() {
    let r = TestRepo::simple();
    let systmp = r.outside.join("systmp");
    std::fs::create_dir_all(&systmp).expect("mkdir");
    let wo = r.work_order(basic_order(&["sleep 60"]));
    let replay = upper_two_replay(&r);
    let mut harness = r
        .spawn(&["run", "--sandbox", "--max-attempts", "1", "-w"])
        .env("TMPDIR", &systmp)
        .env(
            "GIT_CONFIG_PARAMETERS",
            "'factory.sandboxBackend'='landlock'",
        )
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let mine = format!("git-factory-tmp-{}-", harness.id());
    let ours = || {
        std::fs::read_dir(&systmp)
            .expect("read")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while ours() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(ours(), 1, "the check runs with its private TMPDIR");
    harness.kill().expect("kill -9");
    harness.wait().expect("reaped");
    let rec = r.factory().args(["recover"]).output().expect("recover");
    assert_eq!(rec.status.code(), Some(0), "{}", stderr_of(&rec));
    let wo = r.work_order(basic_order(&["true"]));
    let out = r
        .replay_command(&wo, &replay, &["--sandbox", "--max-attempts", "1"])
        .env("TMPDIR", &systmp)
        .env(
            "GIT_CONFIG_PARAMETERS",
            "'factory.sandboxBackend'='landlock'",
        )
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(ours(), 0, "the killed run's TMPDIR is removed");
    let left: Vec<_> = std::fs::read_dir(&systmp)
        .expect("read")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn no_command_finds_what_an_earlier_one_left_in_its_private_tmpdir() {
    for way in ways() {
        let r = TestRepo::simple();
        r.git(&[
            "config",
            "factory.verify",
            "sh -c 'mkdir -p \"$TMPDIR/d\" && echo x > \"$TMPDIR/d/planted\" && chmod 000 \"$TMPDIR/d\"'",
        ]);
        let check = "sh -c 'test ! -e \"${TMPDIR:-/tmp}/d\"'";
        passed(&check_run(&r, way, check, &[]), way);
    }
}

/// A sandboxed check in a pooled worktree (`--worktree`) may make files at the tree's root,
/// as tools do (`sed -i`, coverage files, caches), under every backend: that worktree's `.git`
/// file is saved and put back, not made read-only with the whole root — and it is put back.
#[test]
fn a_sandboxed_worktree_check_writes_at_the_trees_root_and_its_git_file_is_put_back() {
    for way in ways() {
        let r = TestRepo::simple();
        let wo = r.work_order(basic_order(&[
            "sh -c 'echo made > made-at-root.txt || exit 1; printf \"gitdir: /nowhere\\n\" > .git; grep -qx TWO app.txt'",
        ]));
        let replay = upper_two_replay(&r);
        let out = r
            .replay_command(&wo, &replay, &["--sandbox", "--worktree", "--json"])
            .envs(way.env(&r))
            .output()
            .expect("runs");
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{way:?}: {stderr}");
        let s: Value = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
        assert_eq!(s["verdict"], "PASS", "{way:?}: {s}");
        // Every pooled worktree still names its own admin folder.
        let porcelain = r.git(&["worktree", "list", "--porcelain"]);
        assert!(!porcelain.contains("prunable"), "{way:?}: {porcelain}");
        for line in porcelain
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
        {
            let dot_git = std::path::Path::new(line).join(".git");
            if let Ok(text) = std::fs::read_to_string(&dot_git) {
                assert!(!text.contains("/nowhere"), "{way:?}: {dot_git:?}: {text}");
            }
        }
    }
}

/// `--agent-command` agents run confined too under `--sandbox` (SPEC §1.1): the repo — its
/// tree and `.git` — is read-only to them, so what such an agent tries to plant there never
/// lands, and its proposal on stdout still makes the run.
#[test]
fn a_sandboxed_agent_command_cannot_write_the_repo() {
    for way in ways() {
        let r = TestRepo::simple();
        // The answer is in the script itself: bubblewrap's /tmp is the agent's own.
        let answer = proposal(
            &diff_replace("app.txt", &["one", "two", "three"], "two", "TWO"),
            "try",
        );
        let script = format!(
            "cat >/dev/null; echo planted > planted.txt 2>/dev/null; \
             printf '#!/bin/sh\\necho hooked\\n' > .git/hooks/pre-commit 2>/dev/null; \
             echo scratch > \"${{TMPDIR:-/tmp}}/agent-scratch\" || exit 3; \
             cat <<'ANSWER'\n{answer}\nANSWER\n"
        );
        let wo = r.work_order(basic_order(&["grep -qx TWO app.txt"]));
        let out = factory_in(&r, way)
            .args(["run", "--sandbox", "--json", "--max-attempts", "1", "-w"])
            .arg(&wo)
            .arg("--agent-command")
            .arg(format!(
                "sh -c {}",
                shlex::try_quote(&script).expect("quotable")
            ))
            .output()
            .expect("runs");
        let stderr = stderr_of(&out);
        let s: Value = serde_json::from_str(&stdout_of(&out)).unwrap_or(Value::Null);
        assert_eq!(s["verdict"], "PASS", "{way:?}: {stderr}\n{s}");
        assert!(!r.root.join("planted.txt").exists(), "{way:?}");
        assert!(!r.root.join(".git/hooks/pre-commit").exists(), "{way:?}");
        assert_eq!(r.read("app.txt").as_deref(), Some("one\nTWO\nthree\n"));
    }
}

/// Kernel settings of the host (`/proc/sys`) and its other switches in `/proc` cannot be opened
/// for writing by a check, even by one run as root: `kernel.core_pattern` names a program the
/// kernel runs as root on the host. Opening for appending writes nothing, so the test changes
/// no setting whatever the outcome.
#[test]
fn a_check_cannot_open_the_hosts_kernel_settings_for_writing() {
    let targets = [
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/kernel/modprobe",
        "/proc/sys/vm/drop_caches",
        "/proc/sysrq-trigger",
        "/proc/irq/default_smp_affinity",
    ];
    assert!(std::path::Path::new(targets[0]).exists());
    let check = format!(
        "sh -c 'for f in {}; do [ -e \"$f\" ] || continue; if (exec 3>>\"$f\") 2>/dev/null; then echo \"opened $f\"; exit 9; fi; done'",
        targets.join(" ")
    );
    for way in ways() {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, &check, &[]), way);
    }
}

/// A System V IPC object of the host, made by `ipcmk`, removed when the test ends.
struct HostIpc {
    flag: &'static str,
    id: String,
}

impl HostIpc {
    fn make(flag: &'static str, extra: &[&str]) -> HostIpc {
        let out = std::process::Command::new("ipcmk")
            .arg(flag)
            .args(extra)
            .output()
            .expect("ipcmk");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        let id = said
            .split_whitespace()
            .last()
            .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
            .unwrap_or_else(|| panic!("ipcmk {flag}: {said}"))
            .to_string();
        HostIpc { flag, id }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        let flag = self.flag.to_lowercase();
        let _ = std::process::Command::new("ipcrm")
            .args([flag.as_str(), self.id.as_str()])
            .output();
    }
}

/// The host's shared-memory segments and message queues are out of a check's reach, and a
/// segment it makes does not outlive it on the host.
#[test]
fn a_check_cannot_reach_the_hosts_system_v_ipc() {
    let shm = HostIpc::make("-M", &["4096"]);
    let queue = HostIpc::make("-Q", &[]);
    // Exits 9 when it attached the host's segment, 8 when it sent to the host's queue; tries
    // to make a segment of key 0x67660001 (IPC_CREAT|0600).
    let check = format!(
        "python3 -c \"import ctypes,sys\nlibc=ctypes.CDLL(None,use_errno=True)\nlibc.shmat.restype=ctypes.c_void_p\np=libc.shmat({shm},None,0)\nif p not in (None, ctypes.c_void_p(-1).value): sys.exit(9)\nm=ctypes.create_string_buffer(b'\\\\x01\\\\0\\\\0\\\\0\\\\0\\\\0\\\\0\\\\0leak', 12)\nif libc.msgsnd({queue},m,4,0o4000)==0: sys.exit(8)\nlibc.shmget(0x67660001,4096,0o1600)\"",
        shm = shm.id,
        queue = queue.id,
    );
    let made_on_host = || {
        let out = std::process::Command::new("ipcs")
            .arg("-m")
            .output()
            .expect("ipcs");
        String::from_utf8_lossy(&out.stdout).contains("0x67660001")
    };
    assert!(
        !made_on_host(),
        "a segment of the test's key is left from before"
    );
    for way in ways() {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, &check, &[]), way);
        let left = made_on_host();
        if left {
            let _ = std::process::Command::new("ipcrm")
                .args(["-M", "0x67660001"])
                .output();
        }
        assert!(!left, "{way:?}: the check's segment is on the host");
    }
}

/// No vsock either: it reaches the hypervisor and the host's other machines, and no network
/// namespace covers it.
#[test]
fn a_check_cannot_make_a_vsock_socket() {
    let check = "python3 -c \"import socket,sys\ntry:\n    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\nexcept OSError:\n    sys.exit(0)\nsys.exit(9)\"";
    for way in ways() {
        let r = TestRepo::simple();
        passed(&check_run(&r, way, check, &[]), way);
    }
}

/// Exits 11..=17 when a change of metadata that must be refused worked on `target` (setuid,
/// setgid, world-writable, an extended attribute, a setuid file made in one go), 20 when
/// what tools do every day (`chmod +x`, `touch`, `cp -p`, `cp -a`) failed.
fn metadata_script(target: &str) -> String {
    format!(
        "t='{target}'; s=\"${{TMPDIR:-/tmp}}/meta\"; \
         chmod u+s \"$t\" 2>/dev/null && exit 11; \
         chmod g+s \"$t\" 2>/dev/null && exit 12; \
         chmod o+w \"$t\" 2>/dev/null && exit 13; \
         chmod 4777 .git/config 2>/dev/null && exit 14; \
         python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.planted\", b\"1\")' \"$t\" 2>/dev/null && exit 15; \
         python3 -c 'import os,sys; os.removexattr(sys.argv[1], \"user.kept\")' \"$t\" 2>/dev/null && exit 16; \
         python3 -c 'import os,sys; os.close(os.open(sys.argv[1], os.O_CREAT|os.O_WRONLY, 0o4755))' \"$s-suid\" 2>/dev/null && exit 17; \
         mkdir -p \"$s\" && echo x > \"$s/f\" && chmod +x \"$s/f\" && touch -d 2001-01-01 \"$s/f\" \
           && cp -p \"$s/f\" \"$s/g\" && cp -a \"$s/f\" \"$s/h\" && touch app.txt || exit 20\n"
    )
}

/// The mode bits and extended attributes of the file the test gave the script.
fn metadata_of(path: &std::path::Path) -> (u32, String) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).expect("stat").permissions().mode();
    let attrs = std::process::Command::new("python3")
        .args([
            "-c",
            "import os,sys; print(sorted(os.listxattr(sys.argv[1])))",
        ])
        .arg(path)
        .output()
        .expect("python3");
    (mode, String::from_utf8_lossy(&attrs.stdout).into_owned())
}

/// `path`, mode 0600, with an extended attribute `user.kept`.
fn victim(path: std::path::PathBuf) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&path, "v").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let set = std::process::Command::new("python3")
        .args([
            "-c",
            "import os,sys; os.setxattr(sys.argv[1], 'user.kept', b'1')",
        ])
        .arg(&path)
        .status()
        .expect("python3");
    assert!(set.success(), "this file system keeps user xattrs");
    path
}

/// A check cannot make a file setuid, setgid or world-writable, nor set or remove extended
/// attributes (`security.capability` would give a binary capabilities) — on a file outside
/// the tree or in it, under any backend — while `chmod +x`, `touch` and `cp -p` keep working.
#[test]
fn a_check_cannot_make_files_setuid_or_world_writable_nor_set_xattrs() {
    for way in ways() {
        for inside in [false, true] {
            let r = TestRepo::simple();
            // other.txt is tracked and no proposal touches it.
            let v = match inside {
                true => {
                    let v = victim(r.root.join("other.txt"));
                    r.git(&["commit", "-qam", "other.txt 0600"]);
                    v
                }
                false => victim(r.outside.join("victim")),
            };
            let before = metadata_of(&v);
            let check = format!(
                "sh -c {}",
                shlex::try_quote(&metadata_script(&v.to_string_lossy())).expect("quotable")
            );
            passed(&check_run(&r, way, &check, &[]), way);
            let after = metadata_of(&v);
            assert_eq!(after.0 & 0o7777, before.0 & 0o7777, "{way:?} {v:?}");
            assert_eq!(after.1, before.1, "{way:?} {v:?}");
        }
    }
}

/// The same holds for a sandboxed agent, which can still edit and commit.
#[test]
fn a_sandboxed_agent_cannot_make_files_setuid_or_world_writable_nor_set_xattrs() {
    for way in ways() {
        let r = TestRepo::simple();
        let v = victim(r.outside.join("victim"));
        let before = metadata_of(&v);
        let script = format!(
            "{} sed -i s/^two$/TWO/ app.txt",
            metadata_script(&v.to_string_lossy()).replace("|| exit 20\n", "|| exit 20;")
        );
        agent_passes(&r, way, &script);
        assert_eq!(metadata_of(&v), before, "{way:?}");
    }
}

/// What a check may `chmod` without writing it — the tree's root, `.git/config`, the hooks
/// folder and a hook, the verify key — gets its mode back after the command, under every
/// backend, and is listed among the side effects.
#[test]
fn modes_a_check_changed_on_the_trees_root_and_in_git_are_put_back() {
    use std::os::unix::fs::PermissionsExt;
    for way in ways() {
        let r = TestRepo::simple();
        let entries = [
            r.root.clone(),
            r.root.join(".git/config"),
            r.root.join(".git/hooks"),
            r.root.join(".git/hooks/pre-commit.sample"),
            r.root.join(".git/factory/verify-key"),
        ];
        let modes = || -> Vec<u32> {
            (entries.iter())
                .map(|p| std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o7777))
                .collect()
        };
        let check = "sh -c 'chmod 700 . .git/hooks 2>/dev/null; chmod 640 .git/config .git/factory/verify-key 2>/dev/null; chmod 700 .git/hooks/pre-commit.sample 2>/dev/null; true'";
        // The verify key is made before the first check: this first run makes it.
        passed(&check_run(&r, way, "true", &[]), way);
        r.git(&["checkout", "--", "app.txt"]);
        let before = modes();
        let s = check_run(&r, way, check, &[]);
        passed(&s, way);
        assert_eq!(modes(), before, "{way:?}");
        assert!(
            (s["side_effects"].as_array().into_iter().flatten()).any(|e| e == "."),
            "{way:?}: {s}"
        );
    }
}
