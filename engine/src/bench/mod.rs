//! `bench`: a fixed search over fixed positions whose node count is the engine's
//! signature (workers compare it before a test) and whose speed is its benchmark.

pub mod positions;

use std::time::{Duration, Instant};

use crate::bench::positions::POSITIONS;
use crate::xiangqi::Position;
use crate::xiangqi::search::limits::Limits;
use crate::xiangqi::search::{SearchOptions, Shared, search};

/// The default depth.
pub const DEFAULT_DEPTH: i32 = 10;

/// What a bench run measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchResult {
    /// Nodes over all positions: the signature.
    pub nodes: u64,
    /// Time taken.
    pub elapsed: Duration,
}

/// Searches every bench position to `depth` with one thread and a fresh 16 MiB table,
/// with the handcrafted evaluation: the signature.
pub fn run(depth: i32) -> BenchResult {
    run_with(depth, &SearchOptions::default())
}

/// [`run`] with other search options (an NNUE net, for its speed).
pub fn run_with(depth: i32, options: &SearchOptions) -> BenchResult {
    let started = Instant::now();
    let mut nodes = 0;
    let limits = Limits { depth: Some(depth), ..Limits::default() };
    for fen in POSITIONS {
        let position = Position::from_fen(fen).expect("bench positions are valid");
        let shared = Shared::new(16);
        nodes += search(&shared, &position, &[], &limits, options, |_| {}).nodes;
    }
    BenchResult { nodes, elapsed: started.elapsed() }
}

impl BenchResult {
    /// The lines an engine's `bench` prints, Stockfish's format: the time, the nodes
    /// (the signature) and the speed.
    pub fn report(&self) -> String {
        let seconds = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "Total time (ms) : {}\nNodes searched  : {}\nNodes/second    : {}",
            self.elapsed.as_millis(),
            self.nodes,
            (self.nodes as f64 / seconds) as u64
        )
    }
}

/// The signature in an engine's `bench` output: the number after the last "Nodes
/// searched" (Stockfish's format, which ours and most engines print).
pub fn parse_signature(output: &str) -> Option<u64> {
    last_figure(output, "Nodes searched")
}

/// The number after the last line starting with `label` (and spaces or a colon).
fn last_figure(output: &str, label: &str) -> Option<u64> {
    output
        .lines()
        .filter_map(|l| l.trim().strip_prefix(label))
        .filter_map(|rest| rest.trim_start_matches([' ', ':']).trim().parse().ok())
        .next_back()
}

/// What an engine's `bench` printed: its signature, and its speed where it says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// The nodes searched: the signature.
    pub signature: u64,
    /// "Nodes/second", as Stockfish's family and ours print it; some engines do not.
    pub nodes_per_second: Option<u64>,
}

/// The [`Reading`] of a bench's output, `None` without a signature.
pub fn parse_reading(output: &str) -> Option<Reading> {
    let signature = parse_signature(output)?;
    let nodes_per_second = last_figure(output, "Nodes/second").filter(|&nps| nps > 0);
    Some(Reading { signature, nodes_per_second })
}

/// The most a bench may print, standard output and error together: ours prints a few
/// KB, Stockfish's a few dozen lines; more is an engine flooding its reader.
pub const MAX_BENCH_OUTPUT: usize = 1 << 20;

/// How long a bench may run before it counts as hung: Fairy-Stockfish's takes seconds.
pub const BENCH_TIMEOUT: Duration = Duration::from_secs(120);

/// An engine's bench signature could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// The program did not run.
    #[error("running {program} bench: {error}")]
    Run {
        /// The program.
        program: String,
        /// Why.
        error: std::io::Error,
    },
    /// It ran but printed no signature.
    #[error("{0} bench printed no 'Nodes searched'")]
    Missing(String),
    /// It printed more than [`MAX_BENCH_OUTPUT`] bytes: stopped.
    #[error("{0} bench printed more than {MAX_BENCH_OUTPUT} bytes: stopped")]
    Flood(String),
    /// It ran longer than it may: stopped.
    #[error("{program} bench ran longer than {seconds} s: stopped")]
    Timeout {
        /// The program.
        program: String,
        /// The time it had.
        seconds: u64,
    },
}

/// What an engine is sent on its standard input for its bench with `options` set, over
/// `protocol` ("uci" or "ucci"): the options, then `bench` and `quit`, as Stockfish's
/// command loop takes them, so that the signature is the one of the net and options the
/// games are played with. `None` without options: the engine is asked with `<engine>
/// bench` on its command line, which engines that know no `bench` command in their loop
/// answer too.
pub fn bench_commands(protocol: &str, options: &[(String, String)]) -> Option<String> {
    if options.is_empty() {
        return None;
    }
    let mut commands = format!("{protocol}\n");
    for (name, value) in options {
        commands += &match protocol {
            "ucci" => format!("setoption {name} {value}\n"),
            _ => format!("setoption name {name} value {value}\n"),
        };
    }
    commands += "isready\nbench\nquit\n";
    Some(commands)
}

/// Runs the bench of the engine `binary` with `options` set (see [`bench_commands`]) and
/// reads its signature and speed: what a test's submitter records and every worker
/// checks (and scales clocks by) before playing.
pub fn bench_of(
    binary: &std::path::Path,
    protocol: &str,
    options: &[(String, String)],
) -> Result<Reading, SignatureError> {
    let commands = bench_commands(protocol, options);
    let mut command = std::process::Command::new(binary);
    if commands.is_none() {
        command.arg("bench");
    }
    bench_from(command, commands, &binary.display().to_string(), BENCH_TIMEOUT)
}

/// Runs `command`, an engine's `bench` however it is started (a worker's starts in its
/// sandbox), and reads its signature and speed; `program` names it in errors. The engine is not
/// trusted: what it prints is read up to [`MAX_BENCH_OUTPUT`] and it runs for at most
/// `timeout`; past either it is killed and the bench fails, not its reader (a bench
/// read whole, without a bound, took a worker down: review of 2026-11-28, F4).
pub fn bench_from(
    mut command: std::process::Command,
    commands: Option<String>,
    program: &str,
    timeout: Duration,
) -> Result<Reading, SignatureError> {
    use std::process::Stdio;
    let run_error = |error| SignatureError::Run { program: program.to_owned(), error };
    let stdin = if commands.is_some() { Stdio::piped() } else { Stdio::null() };
    command.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(run_error)?;
    if let (Some(commands), Some(mut stdin)) = (commands, child.stdin.take()) {
        // Written on a thread: an engine that never reads must not hold the reader.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(commands.as_bytes());
        });
    }
    let pipes: [Box<dyn std::io::Read + Send>; 2] =
        [Box::new(child.stdout.take().expect("piped")), Box::new(child.stderr.take().expect("piped"))];
    // Each pipe is read on a thread of its own, the two within one budget.
    let budget = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(MAX_BENCH_OUTPUT));
    let (sender, receiver) = std::sync::mpsc::channel();
    for pipe in pipes {
        let (sender, budget) = (sender.clone(), budget.clone());
        std::thread::spawn(move || {
            let _ = sender.send(read_within(pipe, &budget));
        });
    }
    let deadline = Instant::now() + timeout;
    let mut text = String::new();
    for _ in 0..2 {
        let failed = match receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Some(bytes)) => {
                text += &String::from_utf8_lossy(&bytes);
                continue;
            }
            Ok(None) => SignatureError::Flood(program.to_owned()),
            Err(_) => SignatureError::Timeout { program: program.to_owned(), seconds: timeout.as_secs() },
        };
        let _ = child.kill();
        let _ = child.wait();
        return Err(failed);
    }
    // Both pipes closed: the bench is over, or has closed them and goes on alone.
    let _ = child.kill();
    let _ = child.wait();
    parse_reading(&text).ok_or(SignatureError::Missing(program.to_owned()))
}

/// Reads `pipe` to its end, taking what it reads from `budget`; `None` when the budget
/// runs out first (the other reader then sees it spent too).
fn read_within(mut pipe: Box<dyn std::io::Read + Send>, budget: &std::sync::atomic::AtomicUsize) -> Option<Vec<u8>> {
    use std::sync::atomic::Ordering;
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let n = match pipe.read(&mut buffer) {
            Ok(0) | Err(_) => return Some(bytes),
            Ok(n) => n,
        };
        let taken = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(n));
        if taken.is_err() {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_read_in_either_spacing() {
        assert_eq!(parse_signature("info x\nNodes searched  : 721742\nNodes/second: 5\n"), Some(721742));
        assert_eq!(parse_signature("Nodes searched: 12\nNodes searched: 34"), Some(34));
        assert_eq!(parse_signature("no bench here"), None);
        let stockfish = "Total time (ms) : 1201\nNodes searched  : 2004567\nNodes/second    : 1669081\n";
        assert_eq!(parse_reading(stockfish), Some(Reading { signature: 2004567, nodes_per_second: Some(1669081) }));
        assert_eq!(parse_reading("Nodes searched: 9\n"), Some(Reading { signature: 9, nodes_per_second: None }));
        assert_eq!(parse_reading("Nodes/second: 9\n"), None);
    }

    /// A bench as a shell script: what the engine prints, and how long it takes.
    fn script(text: &str) -> std::process::Command {
        let mut command = std::process::Command::new("sh");
        command.args(["-c", text]);
        command
    }

    #[test]
    fn a_signature_is_read_from_either_stream() {
        let read = |text| bench_from(script(text), None, "script", BENCH_TIMEOUT).unwrap().signature;
        assert_eq!(read("echo info; echo 'Nodes searched: 42'"), 42);
        assert_eq!(read("echo 'Nodes searched  : 7' >&2"), 7, "Stockfish prints it on standard error");
        let missing = bench_from(script("echo nothing"), None, "script", BENCH_TIMEOUT).unwrap_err();
        assert!(matches!(missing, SignatureError::Missing(_)), "{missing}");
    }

    /// The review's flooding and sleeping benches (2026-11-28, F4): an engine printing
    /// without end, or sleeping, is stopped and its bench fails; its reader holds at
    /// most the budget, and waits at most its timeout.
    #[test]
    fn a_bench_that_floods_or_sleeps_fails_and_is_stopped() {
        let started = Instant::now();
        let flood = bench_from(script("yes 'Nodes searched: 1'"), None, "flood", BENCH_TIMEOUT).unwrap_err();
        assert!(matches!(flood, SignatureError::Flood(_)), "{flood}");
        let flood = bench_from(script("yes error >&2"), None, "flood", BENCH_TIMEOUT).unwrap_err();
        assert!(matches!(flood, SignatureError::Flood(_)), "{flood}");
        assert!(started.elapsed() < BENCH_TIMEOUT, "stopped by its output, not its time");
        let sleeper = bench_from(script("sleep 30"), None, "sleeper", Duration::from_millis(300)).unwrap_err();
        assert!(matches!(sleeper, SignatureError::Timeout { .. }), "{sleeper}");
        // A bench that closes its output and goes on alone is not waited for either.
        let detached = script("exec >&- 2>&-; sleep 30");
        let started = Instant::now();
        assert!(matches!(bench_from(detached, None, "detached", BENCH_TIMEOUT), Err(SignatureError::Missing(_))));
        assert!(started.elapsed() < Duration::from_secs(20), "killed once its output closed");
    }

    #[test]
    fn bench_positions_are_reachable_positions() {
        for fen in POSITIONS {
            assert!(Position::from_fen(fen).is_ok(), "{fen}");
        }
    }
}
