//! The sandbox engines from a coordinator run in: Debian's `bubblewrap` (`bwrap`)
//! builds the engine a world of its own, and util-linux's `prlimit` (with `setpriv`
//! when the worker runs as root) bounds it, so that an uploaded binary cannot reach the
//! network, the worker's files or environment, other engines' binaries, or the
//! machine's memory and process table.
//!
//! What the engine gets: the system's programs and libraries (`/usr`, read-only), its
//! own binary and the files it was given (its net), read-only at their own paths, a
//! private `/tmp` of bounded size as its working directory, new PID, network, IPC and
//! UTS namespaces (no network at all, not even the host's loopback), an environment
//! holding only `HOME` and `PATH`, and limits on address space, processes, CPU time
//! and open files. It dies with the worker (`--die-with-parent`, and the PID namespace
//! takes every process it started down with it).
//!
//! Its `/dev` is read-only but for a `/dev/shm` of bounded size, and its host name is
//! `sandbox`.
//!
//! The memory all its processes hold together is bounded too ([`resident`]), and a
//! seccomp filter refuses it user namespaces and the kernel's least confined calls
//! ([`syscalls`]). A worker that runs as root starts each engine as a user id of its
//! own, with no capability; otherwise the engine keeps the worker's user inside a user
//! namespace. Either way the process limit counts the engine's own processes only.
//!
//! What it does not stop: reading world-readable system files under `/usr`; using
//! all the CPU time its limit allows (the worker's clock still forfeits slow moves);
//! side channels; exploits of the kernel's calls it still allows.

pub mod resident;
pub mod syscalls;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use command_fds::{CommandFdExt, FdMapping};

/// The first of the users a root worker's engines run as: each engine its own, so
/// that the process limit, which the kernel counts per user, is each engine's own and
/// no engine can signal another. Unused ids far above any real user's.
const FIRST_ENGINE_UID: u32 = 3_000_000_000;

/// The user of the next engine started by this worker (as root).
fn next_engine_uid() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let slot = NEXT.fetch_add(1, Ordering::Relaxed) % 100_000;
    FIRST_ENGINE_UID + (std::process::id() % 10_000) * 100_000 + slot
}

/// How an engine is confined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    /// Address space of each of its processes, bytes (the engine's hash table and
    /// threads' stacks live here).
    pub memory_bytes: u64,
    /// Resident memory of all its processes together, bytes.
    pub resident_bytes: u64,
    /// Processes and threads (of the engine's user when the worker is root).
    pub processes: u64,
    /// CPU seconds over the engine's life.
    pub cpu_seconds: u64,
    /// Open file descriptors.
    pub open_files: u64,
    /// Size of its private `/tmp`, bytes.
    pub scratch_bytes: u64,
    /// Size of its `/dev/shm` (POSIX shared memory), bytes.
    pub shared_memory_bytes: u64,
    /// Files it may read besides its binary (its net), bound read-only at their paths.
    pub read_only: Vec<PathBuf>,
    /// Whether the worker runs as root: its engines then run as users of their own,
    /// else in a user namespace (by default, read off this process).
    pub worker_is_root: bool,
}

impl Default for Sandbox {
    /// Room for any engine's hash table and threads, none for a fork bomb.
    fn default() -> Self {
        Sandbox {
            memory_bytes: 8 << 30,
            resident_bytes: 8 << 30,
            processes: 256,
            cpu_seconds: 24 * 3600,
            open_files: 256,
            scratch_bytes: 64 << 20,
            shared_memory_bytes: 16 << 20,
            read_only: Vec::new(),
            worker_is_root: std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0),
        }
    }
}

/// Why the sandbox cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `bwrap` is not installed.
    #[error("the engine sandbox needs bubblewrap (apt install bubblewrap), or turn it off with --no-sandbox")]
    Missing,
    /// The probe ran but the sandbox did not start.
    #[error("bubblewrap cannot build a sandbox here: {0}")]
    Broken(String),
    /// The system-call filter cannot be made or handed to bubblewrap.
    #[error("the engine sandbox's system-call filter: {0}")]
    Filter(String),
}

/// The descriptors bubblewrap reads the system-call filters from, in the engine's
/// starter only (above its standard streams).
const FILTER_DESCRIPTORS: [i32; 2] = [3, 4];

impl Sandbox {
    /// The command that runs `program` with `args` inside the sandbox.
    pub fn command(&self, program: &Path, args: &[String]) -> Result<Command, SandboxError> {
        let mut command = Command::new("bwrap");
        self.hand_over_filters(&mut command)?;
        command.args(["--ro-bind", "/usr", "/usr"]);
        // Merged-/usr systems have these as links into /usr; others as directories.
        for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache"] {
            command.args(["--ro-bind-try", dir, dir]);
        }
        // Its own /dev, read-only but for a small /dev/shm: bubblewrap's /dev is a
        // writable tmpfs outside every limit, where an engine could fill half the
        // machine's memory (F7 of the 2026-11-28 review).
        command.args(["--proc", "/proc", "--dev", "/dev"]);
        command.args(["--perms", "1777", "--size", &self.shared_memory_bytes.to_string(), "--tmpfs", "/dev/shm"]);
        command.args(["--remount-ro", "/dev"]);
        command.args(["--perms", "1777", "--size", &self.scratch_bytes.to_string(), "--tmpfs", "/tmp"]);
        let files: Vec<&Path> = std::iter::once(program).chain(self.read_only.iter().map(PathBuf::as_path)).collect();
        // bubblewrap gives the directories it makes for a bind the modes of the host's
        // (a root worker's cache under /root would be 0700, closed to the engine's
        // user): the ones above the engine's files are made first, open to read.
        let mut made = std::collections::BTreeSet::new();
        for file in &files {
            let outside_usr = file.ancestors().skip(1).filter(|dir| !dir.starts_with("/usr") && dir.parent().is_some());
            for dir in outside_usr.collect::<Vec<_>>().into_iter().rev() {
                if made.insert(dir) {
                    command.args(["--perms", "0755", "--dir"]).arg(dir);
                }
            }
        }
        for file in files {
            command.arg("--ro-bind").arg(file).arg(file);
        }
        command.args(["--chdir", "/tmp", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]);
        // The machine's name is not the engine's business.
        command.args(["--hostname", "sandbox"]);
        command.args(["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]);
        command.args(["--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/bin:/bin"]);
        if self.worker_is_root {
            // Root is exempt from the process limit and may write anything: the engine
            // becomes a user of its own (setpriv keeps no capability across the change).
            let user = next_engine_uid().to_string();
            command.args(["--", "/usr/bin/setpriv", "--reuid", &user, "--regid", &user, "--clear-groups"]);
        } else {
            // No user namespace of its own inside (where it would be root again).
            command.args(["--unshare-user", "--disable-userns", "--"]);
        }
        command.arg("/usr/bin/prlimit");
        command.arg(format!("--as={}", self.memory_bytes));
        command.arg(format!("--nproc={}", self.processes));
        command.arg(format!("--cpu={}", self.cpu_seconds));
        command.arg(format!("--nofile={}", self.open_files));
        command.args(["--core=0", "--"]).arg(program).args(args);
        Ok(command)
    }

    /// Gives bubblewrap the system-call filters, each through a pipe of its own mapped
    /// to a fixed descriptor of the started process only (a descriptor open in the
    /// worker would be inherited by every engine started at the same time).
    fn hand_over_filters(&self, command: &mut Command) -> Result<(), SandboxError> {
        let filters = syscalls::filters().map_err(|e| SandboxError::Filter(e.to_string()))?;
        let mut mappings = Vec::new();
        for (program, child_fd) in filters.iter().zip(FILTER_DESCRIPTORS) {
            let (reader, mut writer) = std::io::pipe().map_err(|e| SandboxError::Filter(e.to_string()))?;
            // A few hundred bytes: the pipe holds them before bubblewrap reads.
            writer.write_all(program).map_err(|e| SandboxError::Filter(e.to_string()))?;
            mappings.push(FdMapping { parent_fd: reader.into(), child_fd });
            command.args(["--add-seccomp-fd", &child_fd.to_string()]);
        }
        command.fd_mappings(mappings).map_err(|e| SandboxError::Filter(e.to_string()))?;
        Ok(())
    }

    /// Checks that a sandbox can be built on this machine, so that a worker fails at
    /// its start with the reason rather than on every game.
    pub fn probe(&self) -> Result<(), SandboxError> {
        let output = self.command(Path::new("/usr/bin/true"), &[])?.output().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SandboxError::Missing,
            _ => SandboxError::Broken(e.to_string()),
        })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(SandboxError::Broken(String::from_utf8_lossy(&output.stderr).trim().to_owned()))
        }
    }
}

/// The command that runs `program` with `args`: in `sandbox`, or as is. Either way it
/// dies with the worker.
pub fn command_for(sandbox: Option<&Sandbox>, program: &Path, args: &[String]) -> Result<Command, SandboxError> {
    match sandbox {
        Some(sandbox) => sandbox.command(program, args),
        None => {
            let mut command = Command::new(program);
            command.args(args);
            // Engines are started and used by one game thread each.
            xq_proto::process::die_with_parent(&mut command);
            Ok(command)
        }
    }
}
