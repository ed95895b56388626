//! What runs where (README, Platforms): on a Linux kernel that has neither backend `--sandbox`
//! needs — no Landlock (as before 5.13, or disabled at boot) and a bubblewrap that cannot make
//! its namespaces — a sandboxed run is refused up front, naming why each backend failed.

use crate::common::*;
use std::collections::BTreeMap;

/// A seccomp program (the bytes the kernel reads) under which Landlock's three system calls
/// fail with ENOSYS, as on a kernel built without it; everything else is allowed.
fn no_landlock_filter() -> Vec<u8> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    const ENOSYS: u32 = 38;
    // landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: numbered alike on
    // every architecture.
    let rules = [444, 445, 446]
        .into_iter()
        .map(|nr| (nr, vec![]))
        .collect::<BTreeMap<_, _>>();
    let arch = TargetArch::try_from(std::env::consts::ARCH).expect("a seccomp architecture");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(ENOSYS),
        arch,
    )
    .expect("filter");
    let program = BpfProgram::try_from(filter).expect("program");
    let mut bytes = Vec::new();
    for ins in &program {
        bytes.extend(ins.code.to_ne_bytes());
        bytes.push(ins.jt);
        bytes.push(ins.jf);
        bytes.extend(ins.k.to_ne_bytes());
    }
    bytes
}

#[test]
fn sandbox_is_refused_up_front_on_a_kernel_without_landlock_or_a_working_bubblewrap() {
    if !bwrap_or_skip() {
        return;
    }
    let real_bwrap = std::process::Command::new("sh")
        .args(["-c", "command -v bwrap"])
        .output()
        .expect("sh");
    let real_bwrap = stdout_of(&real_bwrap).trim().to_string();
    let r = TestRepo::simple();
    let filter = r.outside.join("no-landlock.bpf");
    std::fs::write(&filter, no_landlock_filter()).expect("write");
    let wo = r.work_order(basic_order(&["true"]));
    let replay = r.replay("rp", &[]);
    let before = r.git(&["status", "--porcelain", "--ignored"]);
    let head = r.git(&["rev-parse", "HEAD"]);

    // The real bubblewrap only sets the filter on git-factory (as the kernel would be); the
    // one git-factory finds on PATH fails as on a host that forbids user namespaces.
    let mut cmd = assert_cmd::Command::new("bash");
    hermetic(&mut cmd, &r.home);
    let out = cmd
        .current_dir(&r.root)
        .env(
            "PATH",
            crate::sandbox::with_path_first(&crate::sandbox::broken_bwrap(&r)),
        )
        .args(["-c", "exec 3<\"$1\"; shift; exec \"$@\"", "wrap"])
        .arg(&filter)
        .args([
            real_bwrap.as_str(),
            "--dev-bind",
            "/",
            "/",
            "--seccomp",
            "3",
        ])
        .arg(assert_cmd::cargo::cargo_bin("git-factory"))
        .args(["run", "--sandbox", "--max-attempts", "1", "-w"])
        .arg(&wo)
        .arg("--replay")
        .arg(&replay)
        .output()
        .expect("runs");
    let said = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.starts_with("error: --sandbox: no sandbox confines on this machine (bwrap: "),
        "{said}"
    );
    assert!(
        said.contains("setting up uid map: Permission denied"),
        "{said}"
    );
    assert!(
        said.contains("landlock: this kernel does not enforce Landlock"),
        "{said}"
    );
    assert!(
        said.contains("hint: install bubblewrap") && said.contains("Landlock (Linux 5.13 or later"),
        "{said}"
    );
    assert!(r.run_ids().is_empty(), "nothing recorded");
    assert_eq!(r.git(&["status", "--porcelain", "--ignored"]), before);
    assert_eq!(r.git(&["rev-parse", "HEAD"]), head);
}
