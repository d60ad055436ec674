//! The default book: the openings every Xiangqi match job plays when its request names
//! no book and does not ask for the start position (`start_position`). Without one,
//! every pair of a test played the start position (review of 2026-11-28: "no book by
//! default"), and a deterministic engine's pairs were all the same two games.
//!
//! The book is built into the coordinator (`books/xiangqi-8ply.epd.zst`, written by
//! `scripts/make-book 8`) and stored as an ordinary book artifact the first time a job
//! wants it, so that workers download it, jobs name it by hash and clones replay it,
//! exactly as an uploaded book. It is stored again if retention removed it.

use tonic::Status;
use xq_proto::v1;

use crate::access::caller::Caller;
use crate::access::tokens::Role;
use crate::api::grpc::Shared;

/// The book, compressed: some 100,000 balanced openings of eight plies.
const COMPRESSED: &[u8] = include_bytes!("../../../../books/xiangqi-8ply.epd.zst");

/// Its name as an artifact.
pub const NAME: &str = "xiangqi-8ply.epd";

/// The uploader its artifact is indexed under: not a token's id (those are hex), so
/// it counts against no submitter's quota.
pub const UPLOADER: &str = "coordinator";

/// Its number of openings, counted once.
pub fn openings() -> usize {
    static OPENINGS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *OPENINGS.get_or_init(|| {
        let text = zstd::stream::decode_all(COMPRESSED).expect("the built-in book decompresses");
        text.split(|&b| b == b'\n').filter(|line| !line.is_empty() && !line.starts_with(b"#")).count()
    })
}

/// The stored default book, once a job has wanted it.
pub type DefaultBook = tokio::sync::Mutex<Option<v1::ArtifactRef>>;

impl Shared {
    /// The default book's artifact, stored now if it is not.
    pub async fn default_book(&self) -> Result<v1::ArtifactRef, Status> {
        let mut kept = self.default_book.lock().await;
        if let Some(book) = kept.as_ref()
            && self.storage.artifact(&book.sha256).await.map_err(|e| Status::unavailable(e.to_string()))?.is_some()
        {
            return Ok(book.clone());
        }
        let text = tokio::task::spawn_blocking(|| zstd::stream::decode_all(COMPRESSED))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::internal(format!("the built-in book does not decompress: {e}")))?;
        let coordinator = Caller { role: Role::Admin, token_id: UPLOADER.to_owned() };
        let data = tokio_stream::once(Ok::<_, Status>(text));
        let book = self.store_upload(&coordinator, "book", NAME, data).await?;
        *kept = Some(book.clone());
        Ok(book)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xq_engine::book::Book;
    use xq_engine::variant::Variant;

    #[test]
    fn the_built_in_book_reads_and_is_large_enough_for_a_long_sprt() {
        let text = String::from_utf8(zstd::stream::decode_all(COMPRESSED).unwrap()).unwrap();
        let book = Book::parse(Variant::Xiangqi, &text, NAME).unwrap();
        // A 100,000-pair SPRT (the coordinator's cap) plays each opening once.
        assert!(book.len() >= 100_000, "{} openings", book.len());
        assert_eq!(openings(), book.len());
        // Each a position of its own (by board and side to move).
        let positions: std::collections::HashSet<_> = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| line.split(' ').take(2).collect::<Vec<_>>())
            .collect();
        assert_eq!(positions.len(), book.len());
    }
}
