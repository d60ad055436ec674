//! Opening books parsed once per content and shared by every job that plays them. A
//! test's creation parsed its book again each time, on the async runtime: a submitter
//! creating tests over one large book kept a runtime thread busy per creation (item 2
//! of the security issue). A book is parsed off the runtime, at most one a core at
//! once, and kept only while a job holds it: the jobs bound the memory, not the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;
use xq_engine::book::Book;
use xq_engine::variant::Variant;

/// A book's place in [`Books`]: the book while a job holds it, behind the lock that a
/// second creation of the same book waits on while the first one parses it.
type Slot = Arc<tokio::sync::Mutex<Weak<Book>>>;

/// Parsed books by content hash and variant (a book of FEN lines may read as either).
pub struct Books {
    /// Each book's slot.
    slots: Mutex<HashMap<(String, Variant), Slot>>,
    /// Turns to parse: one a core.
    turns: Semaphore,
    parses: AtomicU64,
}

/// Why [`Books::get_or_parse`] has no book.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BookRefused {
    /// The parser refused the book (its reason).
    #[error("{0}")]
    Unreadable(String),
    /// The parsing task itself failed (it panicked or was cancelled).
    #[error("parsing it failed: {0}")]
    Failed(String),
}

impl Default for Books {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Books { slots: Mutex::default(), turns: Semaphore::new(cores), parses: AtomicU64::new(0) }
    }
}

impl Books {
    /// The book of hash `sha256` read as a `variant` book: the one a job already holds,
    /// or made by `parse` on a blocking thread.
    pub async fn get_or_parse(
        &self,
        sha256: &str,
        variant: Variant,
        parse: impl FnOnce() -> Result<Book, String> + Send + 'static,
    ) -> Result<Arc<Book>, BookRefused> {
        let slot = {
            let mut slots = self.slots.lock().expect("the books' lock is never poisoned");
            // Slots of books no job holds any more, and that no creation waits on, go.
            slots.retain(|_, slot| Arc::strong_count(slot) > 1 || slot.try_lock().is_ok_and(|b| b.strong_count() > 0));
            slots.entry((sha256.to_owned(), variant)).or_default().clone()
        };
        let mut kept = slot.lock().await;
        if let Some(book) = kept.upgrade() {
            return Ok(book);
        }
        let _turn = self.turns.acquire().await.map_err(|e| BookRefused::Failed(e.to_string()))?;
        self.parses.fetch_add(1, Ordering::Relaxed);
        let parsed = tokio::task::spawn_blocking(parse).await.map_err(|e| BookRefused::Failed(e.to_string()))?;
        let book = Arc::new(parsed.map_err(BookRefused::Unreadable)?);
        *kept = Arc::downgrade(&book);
        Ok(book)
    }

    /// Runs `check` (an uploaded book's parse) off the runtime in a turn of the
    /// parses: uploads of books are parsed no more at once than jobs' books are.
    pub async fn in_turn<T: Send + 'static>(
        &self,
        check: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, BookRefused> {
        let _turn = self.turns.acquire().await.map_err(|e| BookRefused::Failed(e.to_string()))?;
        tokio::task::spawn_blocking(check).await.map_err(|e| BookRefused::Failed(e.to_string()))
    }

    /// How many parses were started: what shows that a book is parsed once.
    pub fn parses(&self) -> u64 {
        self.parses.load(Ordering::Relaxed)
    }

    /// How many books have a slot: what shows that books no job holds are let go.
    pub fn slots(&self) -> usize {
        self.slots.lock().expect("the books' lock is never poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENING: &str = "rnbakab1r/9/1c4nc1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR w - - 2 2\n";

    fn parse() -> Result<Book, String> {
        Book::parse(Variant::Xiangqi, OPENING, "book.epd").map_err(|e| e.to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_book_is_parsed_once_while_jobs_hold_it_even_when_asked_for_at_once() {
        let books = Arc::new(Books::default());
        let asked: Vec<_> = (0..8)
            .map(|_| {
                let books = books.clone();
                tokio::spawn(async move { books.get_or_parse("aa", Variant::Xiangqi, parse).await.unwrap() })
            })
            .collect();
        let mut held = Vec::new();
        for book in asked {
            held.push(book.await.unwrap());
        }
        assert_eq!(books.parses(), 1);
        assert!(held.iter().all(|book| Arc::ptr_eq(book, &held[0])), "one book shared by all");
        // The same content read as another variant is another book.
        let refused = books.get_or_parse("aa", Variant::Xiongqi, || Err("not Xiongqi".to_owned())).await;
        assert_eq!(refused.unwrap_err(), BookRefused::Unreadable("not Xiongqi".to_owned()));
        assert_eq!(books.parses(), 2);
    }

    #[tokio::test]
    async fn a_book_no_job_holds_is_let_go_and_parsed_again_when_asked_for() {
        let books = Books::default();
        let held = books.get_or_parse("aa", Variant::Xiangqi, parse).await.unwrap();
        drop(held);
        let again = books.get_or_parse("aa", Variant::Xiangqi, parse).await.unwrap();
        assert_eq!(books.parses(), 2, "nothing held it: parsed again");
        drop(again);
        books.get_or_parse("bb", Variant::Xiangqi, parse).await.unwrap();
        assert_eq!(books.slots(), 1, "the slot of the book let go is gone too");
    }

    /// The parse runs off the runtime: on a runtime of one thread, the parse waits for a
    /// task of that runtime, which could never run if the parse held the thread.
    #[tokio::test(flavor = "current_thread")]
    async fn a_parse_runs_off_the_request_runtime() {
        let books = Books::default();
        let (answer, answered) = std::sync::mpsc::channel();
        let parse = move || {
            answered.recv_timeout(std::time::Duration::from_secs(10)).map_err(|_| "the runtime was held".to_owned())?;
            parse()
        };
        let other_request = async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            answer.send(()).unwrap();
        };
        let (book, ()) = tokio::join!(books.get_or_parse("aa", Variant::Xiangqi, parse), other_request);
        book.unwrap();
    }
}
