//! Child processes that die with the process that started them, however it dies: the
//! `xq local` coordinator and workers, and the engines a worker runs outside the
//! sandbox (inside it, bubblewrap's `--die-with-parent` does the same). A parent killed
//! by SIGKILL (a CI timeout) left them running for 20 minutes.

use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// Has the kernel kill the child `command` starts when its parent dies. The signal
/// comes when the thread that spawned the child ends, so a caller spawns from a thread
/// that lives as long as the child is needed (the main thread, a game's thread).
pub fn die_with_parent(command: &mut Command) {
    use rustix::process::{Signal, getpid, getppid, set_parent_process_death_signal};
    let parent = getpid();
    // SAFETY: the hook runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: it makes two system calls (prctl, getppid)
    // and builds errors from codes, without allocating or taking a lock.
    unsafe {
        command.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // A parent that died before the request would never send the signal.
            if getppid() != Some(parent) {
                return Err(std::io::ErrorKind::NotFound.into());
            }
            Ok(())
        });
    }
}
