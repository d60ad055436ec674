//! Uploaded artifacts: each checked for its kind before it is kept, books parsed for the
//! jobs that play them.

use crate::api::grpc::Shared;
use std::path::Path;
use std::sync::Arc;
use tonic::Status;
use xq_engine::book::{Book, MAX_BOOK_BYTES};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::nnue::Network;
use xq_engine::xiangqi::pgn::PgnFile;
use xq_proto::v1;

/// A book artifact's openings as a `variant` book: the one its jobs already hold, or
/// read and parsed off the request runtime.
pub async fn load_openings(shared: &Shared, sha256: &str, variant: Variant) -> Result<Arc<Book>, String> {
    let (name, _, _) =
        shared.storage.artifact(sha256).await.map_err(|e| e.to_string())?.ok_or(format!("no artifact {sha256}"))?;
    let path = shared.artifacts.path(sha256).map_err(|e| e.to_string())?;
    let parse = move || read_book(&path, &name, variant);
    shared.books.get_or_parse(sha256, variant, parse).await.map_err(|e| e.to_string())
}

/// What an upload's check read, for the caches.
pub(super) enum Checked {
    Net(Network),
    Pgn(PgnFile),
    Other,
}

/// Reads the upload at `path` as what its `kind` says it is (blocking: run it off the
/// request runtime); the refusal names `name` and what was wrong.
pub(super) fn check_upload(path: &Path, kind: &str, name: &str) -> Result<Checked, String> {
    let bytes = || std::fs::read(path).map_err(|e| format!("the upload {name}: {e}"));
    match kind {
        // A net is any engine's file: kept as it is. One in our engine's format is
        // read now, for the self-play or verification job likely to follow.
        "net" => {
            let bytes = bytes()?;
            if bytes.is_empty() {
                return Err(format!("the net {name} is empty"));
            }
            Ok(Network::from_bytes(&bytes).map_or(Checked::Other, Checked::Net))
        }
        "pgn" => match PgnFile::read(&bytes()?) {
            Ok(file) if file.is_empty() => Err(format!("the PGN {name} holds no games")),
            Ok(file) => Ok(Checked::Pgn(file)),
            Err(problem) => Err(format!("the PGN {name} cannot be read: {problem}")),
        },
        // A book is for one variant, which the upload does not say: it must read as a
        // book of either.
        "book" => {
            book_fits(path, name)?;
            let text = String::from_utf8(bytes()?).map_err(|_| format!("the book {name} is not UTF-8 text"))?;
            match Book::parse(Variant::Xiangqi, &text, name) {
                Ok(_) => Ok(Checked::Other),
                Err(_) if Book::parse(Variant::Xiongqi, &text, name).is_ok() => Ok(Checked::Other),
                Err(problem) => {
                    Err(format!("the book cannot be read: {problem} (nor is it a Xiongqi book of FEN lines)"))
                }
            }
        }
        _ => Ok(Checked::Other),
    }
}

/// Refuses a book file larger than a book may be before a byte of it is read.
fn book_fits(path: &Path, name: &str) -> Result<(), String> {
    let size = std::fs::metadata(path).map_err(|e| format!("book {name}: {e}"))?.len();
    if size > MAX_BOOK_BYTES as u64 {
        return Err(format!("the book {name} is {size} bytes, more than a book's {MAX_BOOK_BYTES}"));
    }
    Ok(())
}

/// Reads a stored book file called `name` as a `variant` book (blocking: run it off
/// the request runtime).
fn read_book(path: &Path, name: &str, variant: Variant) -> Result<Book, String> {
    book_fits(path, name)?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("book {name}: {e}"))?;
    Book::parse(variant, &text, name).map_err(|e| e.to_string())
}

impl Shared {
    /// The uploaded artifact `sha256`, which request field `field` names and which must
    /// be of `kind` (`described` so in the error otherwise).
    pub(super) async fn uploaded(
        &self,
        (field, kind, described): (&str, &str, &str),
        sha256: &str,
    ) -> Result<v1::ArtifactRef, Status> {
        match self.storage.artifact(sha256).await.map_err(|e| Status::unavailable(e.to_string()))? {
            Some((name, stored, size)) if stored == kind => {
                Ok(v1::ArtifactRef { sha256: sha256.to_owned(), name, size })
            }
            Some((name, stored, _)) => {
                Err(Status::invalid_argument(format!("{field}: artifact {name} is a {stored}, not {described}")))
            }
            None => Err(Status::failed_precondition(format!("artifact {sha256} has not been uploaded"))),
        }
    }
}
