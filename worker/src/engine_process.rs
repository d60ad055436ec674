//! Any UCI or UCCI engine as a child process: start, handshake, options, positions,
//! searches under a clock, and every way it can fail.
//!
//! Lines are read on a thread of their own into a channel, so every wait has a
//! deadline: a hang, a missing `bestmove`, a closed pipe or a crash becomes an error
//! naming what the engine did, with the tail of its stderr kept for the report.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sandbox::{Sandbox, command_for};
use xq_engine::time_control::TimeControl;
use xq_engine::variant::Variant;
use xq_engine::xiangqi::fen::FenFlavour;
use xq_engine::xiangqi::notation::Dialect;

/// Which protocol an engine speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// UCI (Pikafish, Fairy-Stockfish, ours).
    #[default]
    Uci,
    /// UCCI (ElephantEye and its kin).
    Ucci,
}

/// How to start and set up an engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineConfig {
    /// The name in reports and PGN.
    pub name: String,
    /// The program.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory.
    pub dir: Option<PathBuf>,
    /// Its protocol.
    pub protocol: Protocol,
    /// How it numbers ranks in moves.
    pub dialect: Dialect,
    /// Which letters it reads in FEN.
    pub fen_flavour: FenFlavour,
    /// Options to set, in order.
    pub options: Vec<(String, String)>,
    /// The sandbox it runs in (the working directory is then the sandbox's own);
    /// none: as the worker's user, with its environment.
    pub sandbox: Option<Sandbox>,
    /// Its own time control, where it differs from the game's (time odds).
    pub time_control: Option<TimeControl>,
}

impl EngineConfig {
    /// Tells the engine the game it plays, unless its options already say it: a game
    /// other than Xiangqi is set by `UCI_Variant` first (the handshake sets Xiangqi for
    /// an engine that declares the option, and a start position is sent as
    /// `startpos`, which means Xiangqi's to an engine not told otherwise).
    pub fn announce_variant(&mut self, variant: Variant) {
        if variant != Variant::Xiangqi && !self.options.iter().any(|(name, _)| name.eq_ignore_ascii_case("UCI_Variant"))
        {
            self.options.insert(0, ("UCI_Variant".to_owned(), variant.name().to_owned()));
        }
    }
}

/// How an engine failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The program could not be started.
    #[error("cannot start {command}: {reason}{hint}")]
    Spawn {
        /// The program.
        command: String,
        /// The system's reason.
        reason: String,
        /// What usually mends it, for the common reasons.
        hint: &'static str,
    },
    /// The program started but did not complete the protocol's handshake: most often
    /// an engine of the other protocol, or not an engine at all.
    #[error(
        "it did not answer '{hello}' with '{ok}' ({cause}): is it a {protocol} engine? A {other} engine needs \
         protocol={other_name}"
    )]
    Handshake {
        hello: &'static str,
        ok: &'static str,
        protocol: &'static str,
        other: &'static str,
        other_name: &'static str,
        /// How the handshake failed.
        cause: Box<EngineError>,
    },
    /// The engine closed its output (it exited or crashed).
    #[error("the engine stopped talking (exited or crashed){}", stderr_note(.stderr))]
    Disconnected {
        /// The end of its stderr.
        stderr: String,
    },
    /// The engine did not answer in time.
    #[error("no {expected} within {waited:?}")]
    Timeout {
        /// What was awaited.
        expected: &'static str,
        /// How long.
        waited: Duration,
    },
    /// The engine wrote more lines than any search needs.
    #[error("the engine flooded its output ({0} lines without an answer)")]
    Flood(usize),
    /// The engine wrote a line longer than any protocol line (its output is no longer
    /// read: a line without end would grow the worker's memory without bound).
    #[error("the engine wrote a line longer than {0} bytes")]
    LongLine(usize),
    /// A `bestmove` line without a move.
    #[error("malformed answer: '{0}'")]
    Garbage(String),
}

/// What usually mends a program that cannot be started, by the system's reason.
fn spawn_hint(kind: std::io::ErrorKind) -> &'static str {
    match kind {
        std::io::ErrorKind::PermissionDenied => {
            " (is it executable? `chmod +x` it, or give its interpreter: cmd='python3 engine.py')"
        }
        std::io::ErrorKind::NotFound => " (no such program: give its path, such as cmd=./engine)",
        _ => "",
    }
}

/// The next line of `reader` without its end (`\n` or `\r\n`; bytes that are not
/// UTF-8 replaced); `None` at the end of the output. A line past `max` bytes is an
/// error, and no more than `max` bytes of it are held.
fn read_line(reader: &mut impl BufRead, max: usize) -> Result<Option<String>, EngineError> {
    let mut line = Vec::new();
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            // A broken pipe ends the output like its end.
            Err(_) => &[],
        };
        if buffer.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            break;
        }
        let (taken, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        if line.len() + taken > max + 1 {
            return Err(EngineError::LongLine(max));
        }
        line.extend_from_slice(&buffer[..taken]);
        reader.consume(taken);
        if ended {
            break;
        }
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() { String::new() } else { format!("; its stderr ends with: {stderr}") }
}

/// Lines an engine may write while searching one move before it is cut off.
const FLOOD_LIMIT: usize = 200_000;
/// The longest line read from an engine, in bytes: far beyond any `info` or `option`
/// line, and all the memory one engine's output may hold in the worker.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Bytes of stderr kept.
const STDERR_TAIL: usize = 2_000;
/// How long the handshake and `isready` may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the engine answered to `go`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineReply {
    /// The move as written, in the engine's dialect.
    pub bestmove: String,
    /// The last reported score in centipawns from the mover's view, mates as ±(30000 - n).
    pub score: Option<i32>,
    /// The last reported depth.
    pub depth: Option<u32>,
    /// The time between sending `go` and reading `bestmove`.
    pub elapsed: Duration,
}

/// A running engine.
pub struct EngineProcess {
    config: EngineConfig,
    /// Shared with the sandbox's memory watch, which may kill it; reaped only here.
    child: Arc<Mutex<Child>>,
    stdin: ChildStdin,
    lines: Receiver<Result<String, EngineError>>,
    stderr: Arc<Mutex<String>>,
    /// The `option ...` lines the engine declared.
    declared_options: Vec<String>,
}

impl EngineProcess {
    /// Starts the engine and completes the handshake, setting its options.
    pub fn start(config: &EngineConfig) -> Result<Self, EngineError> {
        let spawn_error =
            |reason: String, hint| EngineError::Spawn { command: config.command.display().to_string(), reason, hint };
        let mut command = command_for(config.sandbox.as_ref(), &config.command, &config.args)
            .map_err(|e| spawn_error(e.to_string(), ""))?;
        if let (None, Some(dir)) = (&config.sandbox, &config.dir) {
            command.current_dir(dir);
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| spawn_error(e.to_string(), spawn_hint(e.kind())))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            loop {
                let line = read_line(&mut stdout, MAX_LINE_BYTES);
                let end = !matches!(line, Ok(Some(_)));
                let message = match line {
                    Ok(Some(line)) => Ok(line),
                    Ok(None) => break,
                    Err(error) => Err(error),
                };
                if sender.send(message).is_err() || end {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let tail = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                let mut text = tail.lock().expect("stderr lock");
                text.push_str(&String::from_utf8_lossy(&buffer[..n]));
                if text.len() > STDERR_TAIL {
                    let cut = text.len() - STDERR_TAIL;
                    let cut = (cut..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
                    text.drain(..cut);
                }
            }
        });
        let child = Arc::new(Mutex::new(child));
        if let Some(sandbox) = &config.sandbox {
            crate::sandbox::resident::watch(&child, sandbox.resident_bytes, Arc::clone(&stderr));
        }
        let mut engine =
            EngineProcess { config: config.clone(), child, stdin, lines, stderr, declared_options: Vec::new() };
        engine.handshake()?;
        Ok(engine)
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The `option ...` lines the engine declared in its handshake.
    pub fn declared_options(&self) -> &[String] {
        &self.declared_options
    }

    /// Whether the engine declared the option `name`.
    fn declares(&self, name: &str) -> bool {
        self.declared_options.iter().any(|line| {
            let rest = line["option ".len()..].trim_start();
            let rest = rest.strip_prefix("name ").unwrap_or(rest);
            rest.split(" type ").next().unwrap_or(rest).trim() == name
        })
    }

    /// The end of the engine's stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().expect("stderr lock").trim().to_owned()
    }

    fn send(&mut self, line: &str) -> Result<(), EngineError> {
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(|_| EngineError::Disconnected { stderr: self.stderr_tail() })
    }

    /// Reads lines until one satisfies `done`, which is returned, before `deadline`.
    fn read_until(
        &mut self,
        expected: &'static str,
        timeout: Duration,
        mut seen: impl FnMut(&str) -> bool,
    ) -> Result<String, EngineError> {
        let deadline = Instant::now() + timeout;
        for _ in 0..FLOOD_LIMIT {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(Ok(line)) => {
                    if seen(line.trim()) {
                        return Ok(line.trim().to_owned());
                    }
                }
                Ok(Err(error)) => return Err(error),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(EngineError::Timeout { expected, waited: timeout });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    // Give the stderr reader a moment to collect the last words.
                    std::thread::sleep(Duration::from_millis(20));
                    return Err(EngineError::Disconnected { stderr: self.stderr_tail() });
                }
            }
        }
        Err(EngineError::Flood(FLOOD_LIMIT))
    }

    fn handshake(&mut self) -> Result<(), EngineError> {
        let (hello, ok, protocol, other, other_name) = match self.config.protocol {
            Protocol::Uci => ("uci", "uciok", "UCI", "UCCI", "ucci"),
            Protocol::Ucci => ("ucci", "ucciok", "UCCI", "UCI", "uci"),
        };
        let mut declared = Vec::new();
        let answered = self.send(hello).and_then(|()| {
            self.read_until("handshake answer", HANDSHAKE_TIMEOUT, |line| {
                if line.starts_with("option ") {
                    declared.push(line.to_owned());
                }
                line == ok
            })
        });
        answered.map_err(|cause| EngineError::Handshake {
            hello,
            ok,
            protocol,
            other,
            other_name,
            cause: Box::new(cause),
        })?;
        self.declared_options = declared;
        if self.config.protocol == Protocol::Uci && self.declares("UCI_Variant") {
            self.send("setoption name UCI_Variant value xiangqi")?;
        }
        self.set_options(&self.config.options.clone())
    }

    /// Sets options (between games: an SPSA probe's values) and waits until the
    /// engine is ready.
    pub fn set_options(&mut self, options: &[(String, String)]) -> Result<(), EngineError> {
        for (name, value) in options {
            match self.config.protocol {
                Protocol::Uci => self.send(&format!("setoption name {name} value {value}"))?,
                Protocol::Ucci => self.send(&format!("setoption {name} {value}"))?,
            }
        }
        self.ready()
    }

    /// Sends `isready` and waits for `readyok`.
    pub fn ready(&mut self) -> Result<(), EngineError> {
        self.send("isready")?;
        self.read_until("readyok", HANDSHAKE_TIMEOUT, |line| line == "readyok").map(|_| ())
    }

    /// Tells the engine a new game starts.
    pub fn new_game(&mut self) -> Result<(), EngineError> {
        if self.config.protocol == Protocol::Uci {
            self.send("ucinewgame")?;
        }
        self.ready()
    }

    /// Sends the position and `go` with `limits` (already in the protocol's words),
    /// and waits up to `timeout` for `bestmove`.
    pub fn go(&mut self, position: &str, limits: &str, timeout: Duration) -> Result<EngineReply, EngineError> {
        // One write for both lines: one system call and one wake-up of the engine.
        let started = Instant::now();
        self.send(&format!("{position}\ngo {limits}"))?;
        let mut score = None;
        let mut depth = None;
        let line = self.read_until("bestmove", timeout, |line| {
            if line.starts_with("info ") {
                let words: Vec<&str> = line.split_whitespace().collect();
                for pair in words.windows(3) {
                    match pair {
                        ["score", "cp", v] => score = v.parse().ok(),
                        ["score", "mate", v] => {
                            score = v.parse::<i32>().ok().map(|m| if m > 0 { 30_000 - m } else { -30_000 - m })
                        }
                        _ => {}
                    }
                }
                for pair in words.windows(2) {
                    match pair {
                        ["depth", v] => depth = v.parse().ok(),
                        ["score", v] if v.parse::<i32>().is_ok() => score = v.parse().ok(),
                        _ => {}
                    }
                }
            }
            line.starts_with("bestmove") || line.starts_with("nobestmove")
        })?;
        let elapsed = started.elapsed();
        let bestmove = line
            .split_whitespace()
            .nth(1)
            .filter(|_| line.starts_with("bestmove"))
            .ok_or_else(|| EngineError::Garbage(line.clone()))?
            .to_owned();
        Ok(EngineReply { bestmove, score, depth, elapsed })
    }

    /// Asks the engine to quit and makes sure it is gone.
    pub fn quit(mut self) {
        let _ = self.send("quit");
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.lock().expect("engine child").try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        let mut child = self.child.lock().expect("engine child");
        if !matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_horse_elephant_flavour_changes_only_the_board() {
        let fen = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR b - - 0 1";
        assert_eq!(
            FenFlavour::HorseElephant.write(fen),
            "rheakaehr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RHEAKAEHR b - - 0 1"
        );
        assert_eq!(FenFlavour::KnightBishop.write(fen), fen);
    }

    #[test]
    fn lines_are_read_to_their_end_and_a_line_past_the_bound_is_an_error() {
        let mut reader = BufReader::with_capacity(4, "uciok\r\nid name x\n\nlast".as_bytes());
        let mut lines = Vec::new();
        while let Some(line) = read_line(&mut reader, 16).unwrap() {
            lines.push(line);
        }
        assert_eq!(lines, ["uciok", "id name x", "", "last"]);
        let mut long = BufReader::with_capacity(4, "0123456789abcdefg\nnext\n".as_bytes());
        assert_eq!(read_line(&mut long, 16), Err(EngineError::LongLine(16)));
        let mut exact = BufReader::with_capacity(4, "0123456789abcdef\n".as_bytes());
        assert_eq!(read_line(&mut exact, 16).unwrap().as_deref(), Some("0123456789abcdef"));
    }
}
