//! The system calls an engine may not make: a seccomp filter that bubblewrap installs
//! on the engine before it runs (`--add-seccomp-fd`), on both of the sandbox's paths.
//!
//! A worker run by an ordinary user keeps its engines out of user namespaces with
//! bubblewrap's `--disable-userns`; a worker run as root starts each engine as a user
//! of its own without capabilities, which the kernel still lets make a user namespace
//! (where it is root again, with the kernel's namespaced code open to it). The filter
//! refuses that on both paths, and with it the calls that open the kernel's least
//! confined code to an unprivileged process: keyrings, BPF programs, performance
//! counters, userfaultfd, io_uring, and the mount and namespace calls.
//!
//! `clone3` passes its flags in memory, where a filter cannot read them, so it is
//! refused as not implemented: the C library then falls back to `clone`, whose flags
//! the filter reads (threads and processes are made as before).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

/// Calls refused outright (with `EPERM`).
const REFUSED: &[libc::c_long] = &[
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The flag that makes a user namespace, refused in `unshare` and `clone`.
const NEW_USER_NAMESPACE: u64 = libc::CLONE_NEWUSER as u64;

/// Why the filter could not be made for this machine.
#[derive(Clone, Debug, thiserror::Error)]
#[error("no seccomp filter for this machine: {0}")]
pub struct FilterError(String);

/// The filters, as the BPF programs bubblewrap reads from a descriptor each: the calls
/// refused with `EPERM`, then `clone3` refused with `ENOSYS`. Compiled once for every
/// engine this worker starts.
pub fn filters() -> Result<&'static [Vec<u8>; 2], FilterError> {
    static FILTERS: std::sync::LazyLock<Result<[Vec<u8>; 2], FilterError>> = std::sync::LazyLock::new(compile);
    FILTERS.as_ref().map_err(Clone::clone)
}

fn compile() -> Result<[Vec<u8>; 2], FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| FilterError(e.to_string()))?;
    let fail = |e: seccompiler::BackendError| FilterError(e.to_string());
    let makes_user_namespace = || -> Result<Vec<SeccompRule>, FilterError> {
        let flags = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(NEW_USER_NAMESPACE),
            NEW_USER_NAMESPACE,
        )
        .map_err(fail)?;
        Ok(vec![SeccompRule::new(vec![flags]).map_err(fail)?])
    };
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    // The flags are `clone`'s first argument on x86_64 and aarch64 alike.
    refused.insert(libc::SYS_unshare, makes_user_namespace()?);
    refused.insert(libc::SYS_clone, makes_user_namespace()?);
    let program = |rules, action| -> Result<Vec<u8>, FilterError> {
        let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch).map_err(fail)?;
        let program: BpfProgram = filter.try_into().map_err(fail)?;
        Ok(program
            .iter()
            .flat_map(|op| {
                let mut bytes = [0u8; 8];
                bytes[..2].copy_from_slice(&op.code.to_ne_bytes());
                bytes[2] = op.jt;
                bytes[3] = op.jf;
                bytes[4..].copy_from_slice(&op.k.to_ne_bytes());
                bytes
            })
            .collect())
    };
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    Ok([
        program(refused, SeccompAction::Errno(libc::EPERM as u32))?,
        program(clone3, SeccompAction::Errno(libc::ENOSYS as u32))?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The programs are whole BPF instructions, end in a return, and each refused call's
    /// number appears in the first (as the constant it is compared with).
    #[test]
    fn the_filters_are_whole_programs_naming_every_refused_call() {
        let [refused, clone3] = filters().unwrap();
        for program in [&refused, &clone3] {
            assert!(!program.is_empty() && program.len() % 8 == 0);
        }
        let constants: Vec<u32> = refused.chunks(8).map(|op| u32::from_ne_bytes(op[4..].try_into().unwrap())).collect();
        for &call in REFUSED.iter().chain([&libc::SYS_unshare, &libc::SYS_clone]) {
            assert!(constants.contains(&(call as u32)), "call {call} missing");
        }
        assert!(!constants.contains(&(libc::SYS_clone3 as u32)));
    }
}
