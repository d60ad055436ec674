//! The failures a worker reports on a lease it cannot work ([`crate::v1::FailureReport`]):
//! their kinds, and the bound on what a report may say. The worker names them, the
//! coordinator reads them back, both through these.

use std::fmt;
use std::str::FromStr;

/// What failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// An artifact (engine, net, book) could not be fetched, or arrived damaged.
    Download,
    /// An engine could not be started.
    Start,
    /// An engine did not answer its protocol's greeting, or `isready`.
    Handshake,
    /// An engine's bench signature was not the test's, or it printed none.
    Bench,
    /// An engine died, hung or answered nonsense before its first move of a game.
    Crash,
    /// An engine's first move of a game was illegal (most often a board notation the
    /// test did not say: ranks 0-9 against 1-10).
    IllegalMove,
}

impl FailureKind {
    /// Every kind.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Download,
        FailureKind::Start,
        FailureKind::Handshake,
        FailureKind::Bench,
        FailureKind::Crash,
        FailureKind::IllegalMove,
    ];

    /// How reports, lists and the API name it.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Download => "download",
            FailureKind::Start => "start",
            FailureKind::Handshake => "handshake",
            FailureKind::Bench => "bench",
            FailureKind::Crash => "crash",
            FailureKind::IllegalMove => "illegal-move",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kind no report may name.
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is no failure kind (download, start, handshake, bench, crash, illegal-move)")]
pub struct UnknownFailureKind(String);

impl FromStr for FailureKind {
    type Err = UnknownFailureKind;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FailureKind::ALL.into_iter().find(|kind| kind.name() == text).ok_or_else(|| UnknownFailureKind(text.to_owned()))
    }
}

/// The most bytes of a failure's detail kept: the error and an engine's last lines.
pub const MAX_FAILURE_DETAIL_BYTES: usize = 2_000;

/// `detail` as it is kept and shown: at most [`MAX_FAILURE_DETAIL_BYTES`] (cut at a
/// character), line breaks kept and every other control character (a terminal's
/// escapes among them) replaced, since it is printed where the engine's author reads it.
pub fn clean_detail(detail: &str) -> String {
    let mut cleaned = String::with_capacity(detail.len().min(MAX_FAILURE_DETAIL_BYTES));
    for c in detail.chars() {
        let c = if c.is_control() && c != '\n' { '\u{fffd}' } else { c };
        if cleaned.len() + c.len_utf8() > MAX_FAILURE_DETAIL_BYTES {
            break;
        }
        cleaned.push(c);
    }
    cleaned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_by_its_name() {
        for kind in FailureKind::ALL {
            assert_eq!(kind.name().parse::<FailureKind>().unwrap(), kind);
        }
        let error = "segfault".parse::<FailureKind>().unwrap_err().to_string();
        assert!(error.contains("'segfault' is no failure kind"), "{error}");
    }

    #[test]
    fn a_detail_is_bounded_and_holds_no_escapes() {
        assert_eq!(clean_detail("no readyok\nits stderr: \u{1b}[2J gone"), "no readyok\nits stderr: \u{fffd}[2J gone");
        let long = "é".repeat(MAX_FAILURE_DETAIL_BYTES);
        let cleaned = clean_detail(&long);
        assert_eq!(cleaned.len(), MAX_FAILURE_DETAIL_BYTES);
        assert!(cleaned.chars().all(|c| c == 'é'));
    }
}
