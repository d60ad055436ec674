//! One bound on the memory an engine's processes hold together.
//!
//! The address-space limit is each process's own, so an engine of 256 processes could
//! hold 256 times it. The kernel's bound on a group of processes is a memory cgroup,
//! which volunteers' machines do not delegate alike (cgroup v1 without delegation, v2
//! with or without, containers), so the worker keeps the bound itself: one thread reads
//! the process table four times a second and kills an engine whose processes (the
//! sandbox's whole tree) hold more resident memory than its bound, noting why in what
//! the worker reports of the engine's end. An engine can exceed the bound by what it
//! touches between two reads, each process still within its address-space limit.

use std::collections::HashMap;
use std::process::Child;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

/// How often the process table is read.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// An engine under watch.
struct Watched {
    /// Gone when the engine's owner has dropped it (reaped it).
    child: Weak<Mutex<Child>>,
    bound_bytes: u64,
    /// Where the reason of a kill is written: the engine's stderr tail.
    note: Arc<Mutex<String>>,
}

/// An engine under watch, held for one round of the check.
struct Live {
    child: Arc<Mutex<Child>>,
    bound_bytes: u64,
    note: Arc<Mutex<String>>,
}

static WATCHED: LazyLock<Mutex<Vec<Watched>>> = LazyLock::new(|| {
    std::thread::Builder::new()
        .name("engine-memory".to_owned())
        .spawn(watch_forever)
        .expect("a thread for the engines' memory bound");
    Mutex::new(Vec::new())
});

/// Keeps the processes of `child` (the sandbox's outermost process) to `bound_bytes` of
/// resident memory together, until the child is dropped by its owner. The owner reaps
/// the child only through the mutex, so the process id read under it is the engine's.
pub fn watch(child: &Arc<Mutex<Child>>, bound_bytes: u64, note: Arc<Mutex<String>>) {
    let watched = Watched { child: Arc::downgrade(child), bound_bytes, note };
    WATCHED.lock().expect("watch list").push(watched);
}

fn watch_forever() {
    loop {
        std::thread::sleep(CHECK_EVERY);
        let live: Vec<Live> = {
            let mut watched = WATCHED.lock().expect("watch list");
            watched.retain(|w| w.child.strong_count() > 0);
            watched
                .iter()
                .filter_map(|w| {
                    Some(Live { child: w.child.upgrade()?, bound_bytes: w.bound_bytes, note: Arc::clone(&w.note) })
                })
                .collect()
        };
        if live.is_empty() {
            continue;
        }
        let table = ProcessTable::read();
        for Live { child, bound_bytes: bound, note } in live {
            let mut child = child.lock().expect("engine child");
            if !matches!(child.try_wait(), Ok(None)) {
                continue;
            }
            let held = table.resident_bytes_of_tree(child.id());
            if held > bound {
                // Noted first: the game thread reads the tail as soon as the pipe closes.
                note.lock().expect("stderr tail").push_str(&format!(
                    "\n[worker] the engine was killed: its processes held {} MiB together, over the sandbox's \
                     bound of {} MiB",
                    held >> 20,
                    bound >> 20
                ));
                let _ = child.kill();
            }
        }
    }
}

/// The machine's processes: each one's parent and resident memory.
#[derive(Debug, Default)]
pub struct ProcessTable {
    children: HashMap<u32, Vec<u32>>,
    resident: HashMap<u32, u64>,
}

impl ProcessTable {
    /// Reads `/proc` (processes that end while it is read are left out).
    pub fn read() -> ProcessTable {
        let mut table = ProcessTable::default();
        let Ok(entries) = std::fs::read_dir("/proc") else { return table };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            if let Some((parent, resident)) = parse_stat(&stat) {
                table.children.entry(parent).or_default().push(pid);
                table.resident.insert(pid, resident * page_bytes());
            }
        }
        table
    }

    /// The resident bytes of `root` and every process below it.
    pub fn resident_bytes_of_tree(&self, root: u32) -> u64 {
        let mut total = 0;
        let mut pending = vec![root];
        while let Some(pid) = pending.pop() {
            total += self.resident.get(&pid).copied().unwrap_or(0);
            pending.extend(self.children.get(&pid).into_iter().flatten());
        }
        total
    }
}

/// A process's parent and resident pages, from its `/proc/<pid>/stat` line. The name
/// (in parentheses) may hold spaces and parentheses of its own: the fields are counted
/// from the last closing parenthesis.
fn parse_stat(line: &str) -> Option<(u32, u64)> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), ..., rss (24), numbered as proc(5) does.
    let parent = fields.get(1)?.parse().ok()?;
    let resident = fields.get(21)?.parse().ok()?;
    Some((parent, resident))
}

/// The size of a memory page, read once from the kernel's own accounting of this
/// process (`/proc/self/smaps`' first mapping); 4 KiB where it cannot be read.
fn page_bytes() -> u64 {
    static PAGE: LazyLock<u64> = LazyLock::new(|| {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
        smaps
            .lines()
            .find_map(|line| line.strip_prefix("KernelPageSize:"))
            .and_then(|size| size.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
            .map_or(4096, |kib| kib * 1024)
    });
    *PAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 10000000 2560 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_stat(line), Some((17, 2560)));
        assert_eq!(parse_stat("4242 (truncated"), None);
    }

    /// This process and a child it starts, read off the real table: the tree's bytes
    /// are the sum of both, and a child holding 64 MiB is seen in it.
    #[test]
    fn a_tree_holds_its_children_s_memory() {
        let alone = ProcessTable::read().resident_bytes_of_tree(std::process::id());
        assert!(alone > 0);
        let mut child = std::process::Command::new("python3")
            .args(["-c", "import time; x = b'x' * (64 << 20); print('held', flush=True); time.sleep(30)"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let table = ProcessTable::read();
        let with_child = table.resident_bytes_of_tree(std::process::id());
        let child_alone = table.resident_bytes_of_tree(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(child_alone >= 64 << 20, "{child_alone}");
        assert!(with_child >= child_alone + alone / 2, "{with_child} {child_alone} {alone}");
    }
}
