//! What a confined process keeps besides its view of the files (SPEC §7.1): no capabilities
//! (a harness run as root must not hand root's powers to a check or an agent: with
//! `CAP_SYS_ADMIN` or `CAP_PERFMON` a Landlock-confined process still reads another
//! process's `/proc/<pid>/environ`), and a seccomp filter, the same under both backends but
//! for what a backend's namespaces already take.
//!
//! For checks and agents alike, the metadata rule: no file made setuid, setgid or
//! world-writable by `chmod(2)` and its kin (one rule per bit: a setuid-root binary left in
//! the user's tree, or `o+w` on `/etc/passwd` under Landlock, whose rights up to ABI 7 do not
//! cover a file's mode), no file created setuid or setgid in one go (`open(2)` with
//! `O_CREAT` or `O_TMPFILE`, `mknod(2)`), no extended attribute set or removed (a
//! `security.capability` attribute gives a binary capabilities); `openat2(2)`, whose mode
//! lies in a structure a filter cannot read, and `io_uring_setup(2)`, whose rings carry
//! `setxattr` past any filter, say they do not exist (`ENOSYS`), so programs take the older
//! way they keep for kernels without them. `chmod +x`, `touch`, `utimes` and `cp -p` keep
//! working. Under Landlock the metadata of every path is still reachable otherwise (a
//! mode without those bits, a timestamp): SPEC §7.1's put-back covers the tree's own.
//!
//! For all, no typing into a terminal: `ioctl(TIOCSTI)` and `TIOCLINUX` are refused, whatever
//! terminal a command finds (it has no controlling one: every command starts in a session of
//! its own, see `exec.rs`).
//!
//! For checks and agents alike, no unix sockets but pairs: a command cannot make a unix
//! socket, so it cannot connect to one by path (Docker's, D-Bus, the user's ssh or gpg agent),
//! which no Landlock ABI up to 7 can deny and bubblewrap cannot hide wherever it lies
//! (`$HOME`, `/run/user`), nor to an abstract one (the X server's), which an agent sharing the
//! host's network namespace would otherwise reach; nor a vsock one, which reaches the
//! hypervisor and no network namespace covers. An agent the user lets reach named sockets
//! (git config `factory.agentSocket`) keeps unix sockets, see `policy.rs`. `socketpair(2)` and pipes stay
//! allowed (subprocesses, Python's `multiprocessing` with the fork start method). Under
//! Landlock, which denies TCP but not UDP, the IP families are refused too, and the host's
//! System V IPC (shared memory, message queues, semaphores), which bubblewrap's IPC namespace
//! takes away; bubblewrap's network namespace already leaves a check only its own loopback.
//!
//! What the filter refuses otherwise fails with "Permission denied" (an extended attribute:
//! "Operation not supported"); a system call made through another
//! architecture's entry (`int 0x80`) ends the process (seccompiler's architecture check), and
//! on x86-64 the x32 numbers of every refused call are refused alike.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// The system calls the filter looks at, on the architectures it is built for.
#[cfg(target_arch = "x86_64")]
mod nr {
    pub const SOCKET: i64 = 41;
    pub const IOCTL: i64 = 16;
    /// shmget shmat shmctl semget semop semctl semtimedop msgget msgsnd msgrcv msgctl.
    pub const SYSV_IPC: &[i64] = &[29, 30, 31, 64, 65, 66, 220, 68, 69, 70, 71];
    /// setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr.
    pub const XATTR_WRITES: &[i64] = &[188, 189, 190, 197, 198, 199];
    /// chmod fchmod fchmodat, each with the index of its mode argument.
    pub const CHMODS: &[(i64, u8)] = &[(90, 1), (91, 1), (268, 2)];
    /// open openat, each with the indexes of its flags and mode arguments.
    pub const OPENS: &[(i64, u8, u8)] = &[(2, 1, 2), (257, 2, 3)];
    /// creat mknod mknodat: they make a file of the mode given (index).
    pub const MAKES: &[(i64, u8)] = &[(85, 1), (133, 1), (259, 2)];
    /// The x32 entry: the same calls, numbered with this bit.
    pub const X32: Option<i64> = Some(0x4000_0000);
}
#[cfg(any(target_arch = "aarch64", target_arch = "riscv64"))]
mod nr {
    pub const SOCKET: i64 = 198;
    pub const IOCTL: i64 = 29;
    pub const SYSV_IPC: &[i64] = &[194, 196, 195, 190, 193, 191, 192, 186, 189, 188, 187];
    pub const XATTR_WRITES: &[i64] = &[5, 6, 7, 14, 15, 16];
    pub const CHMODS: &[(i64, u8)] = &[(52, 1), (53, 2)];
    pub const OPENS: &[(i64, u8, u8)] = &[(56, 2, 3)];
    pub const MAKES: &[(i64, u8)] = &[(33, 2)];
    pub const X32: Option<i64> = None;
}
/// Numbered alike on every architecture: fchmodat2 (mode argument 2).
const FCHMODAT2: (i64, u8) = (452, 2);
/// setxattrat removexattrat.
const XATTRAT_WRITES: [i64; 2] = [463, 466];
const OPENAT2: i64 = 437;
const IO_URING_SETUP: i64 = 425;

/// The terminal requests that type into a terminal's input (`TIOCSTI`) or drive the Linux
/// console (`TIOCLINUX`, which can paste its selection as input too).
const TTY_INPUT_IOCTLS: [u64; 2] = [0x5412, 0x541C];

const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const AF_VSOCK: u64 = 40;
const S_ISUID: u64 = 0o4000;
const S_ISGID: u64 = 0o2000;
const S_IWOTH: u64 = 0o002;
const O_CREAT: u64 = 0o100;
/// `O_TMPFILE`'s own bit (the flag also holds `O_DIRECTORY`, numbered per architecture).
const O_TMPFILE_BIT: u64 = 0o20000000;
/// What a refused call then says: "Permission denied".
const EACCES: u32 = 13;
/// What a refused extended attribute says: "Operation not supported", as on a file system
/// without them, so tools go on without (`cp -p` sets the mode by `chmod` instead of an ACL).
const EOPNOTSUPP: u32 = 95;
/// What a call a filter cannot judge says: "Function not implemented".
const ENOSYS: u32 = 38;

/// Whose filter: what a confined command may not do besides the metadata rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confined {
    /// A check in bubblewrap's namespaces (network, IPC): no unix or vsock sockets.
    CheckInNamespaces,
    /// A check under Landlock: no unix, vsock or IP sockets, no System V IPC.
    CheckUnderLandlock,
    /// An agent (network on): no unix or vsock sockets.
    Agent,
    /// An agent the user let reach named sockets (git config `factory.agentSocket`): no
    /// vsock sockets; unix ones are left to the backend's file rules (see `policy.rs`).
    AgentWithSockets,
}

impl Confined {
    /// Whose filter a command confined by `policy` under Landlock (`landlock`) or bubblewrap
    /// gets.
    pub fn of(policy: &super::Policy, landlock: bool) -> Confined {
        match (policy.network, landlock) {
            (true, _) if policy.agent_sockets.is_empty() => Confined::Agent,
            (true, _) => Confined::AgentWithSockets,
            (false, true) => Confined::CheckUnderLandlock,
            (false, false) => Confined::CheckInNamespaces,
        }
    }

    /// The name the Landlock backend's internal subcommand is told (`--filter NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Confined::CheckInNamespaces => "check-ns",
            Confined::CheckUnderLandlock => "check",
            Confined::Agent => "agent",
            Confined::AgentWithSockets => "agent-sockets",
        }
    }

    pub fn from_name(name: &str) -> Option<Confined> {
        [
            Confined::CheckInNamespaces,
            Confined::CheckUnderLandlock,
            Confined::Agent,
            Confined::AgentWithSockets,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }
}

/// `arg & mask == value`, on the argument's low 32 bits (modes and flags are `int`s).
fn masked(arg: u8, mask: u64, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(mask),
        value,
    )
    .map_err(|e| e.to_string())
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

/// Rules by system call number: an empty list, refused whatever its arguments; several,
/// refused when any holds.
type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// The calls whose arguments a filter cannot read (refused with `ENOSYS`).
fn unjudged_rules() -> Rules {
    with_x32([(OPENAT2, Vec::new()), (IO_URING_SETUP, Vec::new())].into())
}

/// The calls that set or remove an extended attribute (refused with `EOPNOTSUPP`).
fn xattr_rules() -> Rules {
    with_x32(
        (nr::XATTR_WRITES.iter().chain(&XATTRAT_WRITES))
            .map(|&n| (n, Vec::new()))
            .collect(),
    )
}

/// The rules of `who`'s filter refused with `EACCES`.
fn rules(who: Confined) -> Result<Rules, String> {
    let mut map = Rules::new();
    // The metadata rule.
    for &(n, mode) in nr::CHMODS.iter().chain([&FCHMODAT2]) {
        let bits = [S_ISUID, S_ISGID, S_IWOTH].map(|bit| rule(vec![masked(mode, bit, bit)?]));
        map.insert(n, bits.into_iter().collect::<Result<_, _>>()?);
    }
    for &(n, mode) in nr::MAKES {
        let bits = [S_ISUID, S_ISGID].map(|bit| rule(vec![masked(mode, bit, bit)?]));
        map.insert(n, bits.into_iter().collect::<Result<_, _>>()?);
    }
    for &(n, flags, mode) in nr::OPENS {
        let mut rules = Vec::new();
        for flag in [O_CREAT, O_TMPFILE_BIT] {
            for bit in [S_ISUID, S_ISGID] {
                rules.push(rule(vec![
                    masked(flags, flag, flag)?,
                    masked(mode, bit, bit)?,
                ])?);
            }
        }
        map.insert(n, rules);
    }
    // No typing into a terminal, whatever terminal a command finds.
    let tty = TTY_INPUT_IOCTLS.map(|request| {
        let cond = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
            .map_err(|e| e.to_string())?;
        rule(vec![cond])
    });
    map.insert(nr::IOCTL, tty.into_iter().collect::<Result<_, _>>()?);
    // The socket rule, for checks and agents alike; System V IPC, for checks.
    let families: &[u64] = match who {
        Confined::Agent => &[AF_UNIX, AF_VSOCK],
        Confined::AgentWithSockets => &[AF_VSOCK],
        Confined::CheckInNamespaces => &[AF_UNIX, AF_VSOCK],
        Confined::CheckUnderLandlock => &[AF_UNIX, AF_VSOCK, AF_INET, AF_INET6],
    };
    if !families.is_empty() {
        let by_family = families.iter().map(|&f| {
            let cond = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, f)
                .map_err(|e| e.to_string())?;
            rule(vec![cond])
        });
        map.insert(nr::SOCKET, by_family.collect::<Result<_, _>>()?);
    }
    if who == Confined::CheckUnderLandlock {
        for &n in nr::SYSV_IPC {
            map.insert(n, Vec::new());
        }
    }
    Ok(with_x32(map))
}

/// `map` and, on x86-64, the same rules under the x32 numbers.
fn with_x32(mut map: Rules) -> Rules {
    if let Some(bit) = nr::X32 {
        let x32: Vec<(i64, Vec<SeccompRule>)> =
            map.iter().map(|(n, r)| (n | bit, r.clone())).collect();
        map.extend(x32);
    }
    map
}

/// One seccomp program: `rules` refused with `errno`, everything else allowed.
fn program(rules: Rules, errno: u32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// `first` then `then` as one program (bubblewrap's `--seccomp` takes one): each place
/// where `first` would allow the call jumps forward to `then` instead, which decides.
fn chained(first: BpfProgram, then: BpfProgram) -> Result<BpfProgram, String> {
    const RET_K: u16 = 0x06;
    const JMP_JA: u16 = 0x05;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    let len = first.len();
    let mut out: BpfProgram = Vec::with_capacity(len + then.len());
    for (i, mut ins) in first.into_iter().enumerate() {
        if ins.code == RET_K && ins.k == SECCOMP_RET_ALLOW {
            ins.code = JMP_JA;
            ins.jt = 0;
            ins.jf = 0;
            ins.k = u32::try_from(len - i - 1).map_err(|e| e.to_string())?;
        }
        out.push(ins);
    }
    out.extend(then);
    Ok(out)
}

/// The seccomp program of `who`'s filter.
pub fn filter(who: Confined) -> Result<BpfProgram, String> {
    let rest = chained(
        program(unjudged_rules(), ENOSYS)?,
        program(rules(who)?, EACCES)?,
    )?;
    chained(program(xattr_rules(), EOPNOTSUPP)?, rest)
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

/// The Landlock backend's last step before it executes the command (`no_new_privs` is set):
/// no capabilities, and `who`'s filter.
pub fn confine_process(who: Confined) -> Result<(), String> {
    drop_capabilities()?;
    seccompiler::apply_filter(&filter(who)?).map_err(|e| format!("seccomp: {e}"))
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
    fn every_filter_builds_for_this_machine_and_is_whole_instructions() {
        for who in [
            Confined::CheckInNamespaces,
            Confined::CheckUnderLandlock,
            Confined::Agent,
            Confined::AgentWithSockets,
        ] {
            assert_eq!(Confined::from_name(who.name()), Some(who));
            let program = filter(who).expect("builds");
            assert!(!program.is_empty());
            assert_eq!(program_bytes(&program).len(), program.len() * 8);
        }
    }

    #[test]
    fn unix_sockets_go_unless_named_and_only_under_landlock_system_v_ipc() {
        let agent = rules(Confined::Agent).expect("rules");
        let named = rules(Confined::AgentWithSockets).expect("rules");
        let bwrap = rules(Confined::CheckInNamespaces).expect("rules");
        let landlock = rules(Confined::CheckUnderLandlock).expect("rules");
        assert_eq!(agent[&nr::SOCKET].len(), 2);
        assert_eq!(named[&nr::SOCKET].len(), 1);
        for map in [&agent, &named, &bwrap, &landlock] {
            assert_eq!(map[&nr::IOCTL].len(), 2, "no typing into a terminal");
        }
        assert_eq!(bwrap[&nr::SOCKET].len(), 2);
        assert_eq!(landlock[&nr::SOCKET].len(), 4);
        assert!(nr::SYSV_IPC.iter().all(|n| landlock.contains_key(n)));
        assert!(!nr::SYSV_IPC.iter().any(|n| bwrap.contains_key(n)));
        for map in [&agent, &bwrap, &landlock] {
            assert!(!nr::XATTR_WRITES.iter().any(|n| map.contains_key(n)));
            assert_eq!(map[&FCHMODAT2.0].len(), 3);
        }
        assert!(nr::XATTR_WRITES.iter().all(|n| xattr_rules()[n].is_empty()));
        assert!(unjudged_rules()[&OPENAT2].is_empty());
    }

    #[test]
    fn a_chained_program_jumps_to_the_second_wherever_the_first_allows() {
        let first = program(xattr_rules(), EOPNOTSUPP).expect("builds");
        let then = program(rules(Confined::Agent).expect("rules"), EACCES).expect("builds");
        let (len, then_len) = (first.len(), then.len());
        let allows: Vec<usize> = (first.iter().enumerate())
            .filter(|(_, i)| i.code == 0x06 && i.k == 0x7fff_0000)
            .map(|(n, _)| n)
            .collect();
        assert!(!allows.is_empty());
        let both = chained(first.clone(), then.clone()).expect("chains");
        assert_eq!(both.len(), len + then_len);
        for (n, (was, is)) in first.iter().zip(&both).enumerate() {
            match allows.contains(&n) {
                true => assert!(is.code == 0x05 && n + 1 + is.k as usize == len, "{n}"),
                false => assert_eq!(
                    (was.code, was.jt, was.jf, was.k),
                    (is.code, is.jt, is.jf, is.k)
                ),
            }
        }
        assert!(both[len..]
            .iter()
            .zip(&then)
            .all(|(a, b)| a.k == b.k && a.code == b.code));
    }
}
