//! Fail points for the fault drills. `XQ_FAIL_POINT=<name>:<n>` in the coordinator's
//! environment kills the process with SIGKILL the `n`th time the named point is
//! reached, so a drill can stop a real coordinator exactly where a crash is most
//! dangerous (a batch committed, its acknowledgements not yet sent) instead of hoping
//! a kill from outside lands there. Without the variable a point costs one load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The armed point, read once from the environment.
struct Armed {
    name: String,
    at: u64,
    reached: AtomicU64,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let value = std::env::var("XQ_FAIL_POINT").ok()?;
            let (name, at) = value.rsplit_once(':')?;
            Some(Armed { name: name.to_owned(), at: at.parse().ok()?, reached: AtomicU64::new(0) })
        })
        .as_ref()
}

/// The armed point's name, if one is: callers skip the work of finding out whether
/// they reached a point when none is armed, or when it is not theirs.
pub fn armed_name() -> Option<&'static str> {
    armed().map(|armed| armed.name.as_str())
}

/// Marks that the point `name` was reached; kills the process if it is the armed one
/// and this is its `n`th time.
pub fn reached(name: &str) {
    if let Some(armed) = armed()
        && armed.name == name
        && armed.reached.fetch_add(1, Ordering::Relaxed) + 1 == armed.at
    {
        eprintln!("xq-coordinator: fail point {name} reached {} times: killing the process", armed.at);
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}
