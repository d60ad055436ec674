//! Uploaded artifacts: each checked for its kind before it is kept, books parsed for the
//! jobs that play them.

use crate::access::caller::Caller;
use crate::api::grpc::Shared;
use std::path::Path;
use std::sync::Arc;
use tokio_stream::{Stream, StreamExt};
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
enum Checked {
    Net(Network),
    Pgn(PgnFile),
    Other,
}

/// Reads the upload at `path` as what its `kind` says it is (blocking: run it off the
/// request runtime); the refusal names `name` and what was wrong.
fn check_upload(path: &Path, kind: &str, name: &str) -> Result<Checked, String> {
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
        "release" => match xq_proto::release::read_manifest(path) {
            Ok(_) => Ok(Checked::Other),
            Err(problem) => Err(format!("the release {name}: {problem}")),
        },
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
    /// Stores an upload for `caller`: an artifact of `kind` named `name` made of
    /// `data`'s pieces in order (gRPC's stream, or an HTTP request's body), checked as
    /// its kind reads (a net, a book, a PGN) before it is kept, within the disk's reserve
    /// and the caller's quota.
    pub async fn store_upload<S, B>(
        &self,
        caller: &Caller,
        kind: &str,
        name: &str,
        data: S,
    ) -> Result<v1::ArtifactRef, Status>
    where
        S: Stream<Item = Result<B, Status>>,
        B: AsRef<[u8]>,
    {
        self.check_reserve()?;
        crate::api::grpc::quotas::check_stored_bytes(self, caller).await?;
        if !matches!(kind, "engine" | "book" | "net" | "pgn" | "release") {
            return Err(Status::invalid_argument(format!("kind '{kind}': use engine, book, net, pgn or release")));
        }
        // What every worker may be told to run: the operator's alone to offer.
        if kind == "release" && caller.role != crate::access::tokens::Role::Admin {
            return Err(Status::permission_denied("a worker release is uploaded by an admin"));
        }
        if name.is_empty() || name.len() > 200 || name.contains(['/', '\\']) || name.chars().any(char::is_control) {
            return Err(Status::invalid_argument(
                "an upload needs a file name (no path, no control characters, at most 200 bytes)",
            ));
        }
        let mut upload = self.artifacts.begin().await.map_err(|e| Status::unavailable(e.to_string()))?;
        let mut data = std::pin::pin!(data);
        while let Some(piece) = data.next().await {
            if let Err(error) = upload.write(piece?.as_ref()).await {
                return Err(Status::invalid_argument(error.to_string()));
            }
        }
        let sealed = self.artifacts.seal(upload).await.map_err(|e| Status::unavailable(e.to_string()))?;
        // The index keeps an artifact's first kind: the same bytes cannot become a
        // net or a book that was never checked as one.
        if let Some((stored_name, stored_kind, _)) =
            self.storage.artifact(&sealed.sha256).await.map_err(|e| Status::unavailable(e.to_string()))?
            && stored_kind != kind
        {
            return Err(Status::invalid_argument(format!(
                "these bytes were uploaded before as the {stored_kind} {stored_name}, not as a {kind}"
            )));
        }
        // Checked while still under the temporary name, off the request runtime (a net,
        // a PGN or a book may be hundreds of megabytes), and kept only once they read:
        // a refused upload leaves nothing behind, and nothing unreadable is offered.
        let (path, owned_kind, owned_name) = (sealed.path().to_owned(), kind.to_owned(), name.to_owned());
        let check = move || check_upload(&path, &owned_kind, &owned_name);
        let checked = match kind {
            // A book's parse takes a turn with the jobs' books (review of 2026-11-28, F3).
            "book" => self.books.in_turn(check).await.map_err(|e| Status::internal(e.to_string()))?,
            _ => tokio::task::spawn_blocking(check).await.map_err(|e| Status::internal(e.to_string()))?,
        }
        .map_err(Status::invalid_argument)?;
        let (sha256, size) = self.artifacts.keep(sealed).await.map_err(|e| Status::unavailable(e.to_string()))?;
        // Kept for what is likely to follow: a verification job with the net, or over the PGN.
        match checked {
            Checked::Net(net) => self.verification_nets.keep(&sha256, Arc::new(net)),
            Checked::Pgn(file) => self.pgn_files.keep(&sha256, Arc::new(file)),
            Checked::Other => {}
        }
        self.scheduler.index_artifact(&sha256, (name, kind, size), &caller.token_id).await?;
        Ok(v1::ArtifactRef { sha256, name: name.to_owned(), size })
    }

    /// The uploaded artifact `sha256`, which request field `field` names and which must
    /// be of `kind` (`described` so in the error otherwise).
    pub async fn uploaded(
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
