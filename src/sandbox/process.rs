//! What a confined process keeps besides its view of the files (SPEC §7.1): no capabilities
//! (a harness run as root must not hand root's powers to a check or an agent: with
//! `CAP_SYS_ADMIN` or `CAP_PERFMON` a Landlock-confined process still reads another
//! process's `/proc/<pid>/environ`), and for checks, no sockets but pairs.
//!
//! The socket rule is a seccomp filter on `socket(2)`: a check cannot make a unix socket, so
//! it cannot connect to one by path (Docker's, D-Bus, the user's ssh or gpg agent), which no
//! Landlock ABI up to 7 can deny and bubblewrap cannot hide wherever it lies (`$HOME`), nor a
//! vsock one, which reaches the hypervisor and no network namespace covers.
//! `socketpair(2)` and pipes stay allowed (subprocesses, Python's `multiprocessing` with the
//! fork start method). Under Landlock, which denies TCP but not UDP, the IP families are
//! refused too, and the host's System V IPC (shared memory, message queues, semaphores), which
//! bubblewrap's IPC namespace takes away; bubblewrap's network namespace already leaves a
//! check only its own loopback.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// `socket(2)`'s number on the architectures the filter is built for.
#[cfg(target_arch = "x86_64")]
const SYS_SOCKET: i64 = 41;
#[cfg(any(target_arch = "aarch64", target_arch = "riscv64"))]
const SYS_SOCKET: i64 = 198;
/// shmget shmat shmctl semget semop semctl semtimedop msgget msgsnd msgrcv msgctl.
#[cfg(target_arch = "x86_64")]
const SYSV_IPC: &[i64] = &[29, 30, 31, 64, 65, 66, 220, 68, 69, 70, 71];
#[cfg(any(target_arch = "aarch64", target_arch = "riscv64"))]
const SYSV_IPC: &[i64] = &[194, 196, 195, 190, 193, 191, 192, 186, 189, 188, 187];

const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const AF_VSOCK: u64 = 40;
/// What `socket(2)` then says: "Permission denied".
const EACCES: u32 = 13;

/// Which address families a confined check may not make sockets of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Unix and vsock sockets (bubblewrap: its namespaces take care of IP and IPC).
    Unix,
    /// Unix, vsock and IP sockets, and System V IPC (Landlock).
    UnixAndIp,
}

/// The seccomp program of the socket rule (and, under Landlock, of System V IPC).
pub fn socket_filter(denied: Denied) -> Result<BpfProgram, String> {
    let families: &[u64] = match denied {
        Denied::Unix => &[AF_UNIX, AF_VSOCK],
        Denied::UnixAndIp => &[AF_UNIX, AF_VSOCK, AF_INET, AF_INET6],
    };
    let rules = families
        .iter()
        .map(|&family| {
            let cond = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family)
                .map_err(|e| e.to_string())?;
            SeccompRule::new(vec![cond]).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut map = BTreeMap::from([(SYS_SOCKET, rules)]);
    if denied == Denied::UnixAndIp {
        // An empty list: refused whatever the arguments.
        map.extend(SYSV_IPC.iter().map(|&n| (n, Vec::new())));
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        map,
        SeccompAction::Allow,
        SeccompAction::Errno(EACCES),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// The program as the kernel reads it (what bubblewrap's `--seccomp` takes from a file).
pub fn program_bytes(program: &BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for ins in program {
        out.extend(ins.code.to_ne_bytes());
        out.push(ins.jt);
        out.push(ins.jf);
        out.extend(ins.k.to_ne_bytes());
    }
    out
}

/// Installs the socket rule on this process and what it executes (after `no_new_privs`).
pub fn deny_sockets(denied: Denied) -> Result<(), String> {
    let program = socket_filter(denied)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// The Landlock backend's last step before it executes the command (`no_new_privs` is set):
/// no capabilities, and for a check (`network` off) the socket rule.
pub fn confine_process(network: bool) -> Result<(), String> {
    drop_capabilities()?;
    if network {
        return Ok(());
    }
    deny_sockets(Denied::UnixAndIp)
}

/// Drops every capability for good: the bounding and ambient sets emptied, then the
/// effective, permitted and inheritable ones, so the command executed (even as root) has
/// none. A process without `CAP_SETPCAP` has nothing to drop from its bounding set that an
/// exec could give it back (`no_new_privs` ignores file capabilities).
pub fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    let have = rustix::thread::capabilities(None).map_err(|e| format!("capget: {e}"))?;
    if have.effective.contains(CapabilitySet::SETPCAP) {
        for bit in 0..64 {
            let cap = CapabilitySet::from_bits_retain(1 << bit);
            match rustix::thread::remove_capability_from_bounding_set(cap) {
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(e) => return Err(format!("dropping capability {bit}: {e}")),
            }
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(format!("clearing ambient capabilities: {e}")),
    }
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("capset: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_filter_builds_for_this_machine_and_is_whole_instructions() {
        for denied in [Denied::Unix, Denied::UnixAndIp] {
            let program = socket_filter(denied).expect("builds");
            assert!(!program.is_empty());
            assert_eq!(program_bytes(&program).len(), program.len() * 8);
        }
    }
}
