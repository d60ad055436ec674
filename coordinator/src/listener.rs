//! Accepting connections under a cap. A process may hold only so many files; at that
//! limit `accept` fails at once, and a server that simply retries burns a core. Here a
//! connection beyond the cap is accepted and closed at once (the client sees a clean
//! refusal and backs off), and a failing `accept` (no file descriptors left) pauses
//! the loop instead of spinning.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// A connection holding one of the cap's places until it closes.
pub struct CappedStream {
    stream: TcpStream,
    _place: OwnedSemaphorePermit,
}

impl Connected for CappedStream {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for CappedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CappedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Counts of the accept loop, for metrics and tests.
#[derive(Debug, Default)]
pub struct AcceptStats {
    /// Connections accepted and served.
    pub accepted: AtomicU64,
    /// Connections closed at once because the cap was reached.
    pub refused: AtomicU64,
    /// `accept` failures (such as running out of file descriptors).
    pub errors: AtomicU64,
}

/// Accepts connections from `listener`, at most `cap` open at once.
pub fn capped_incoming(
    listener: TcpListener,
    cap: usize,
    stats: Arc<AcceptStats>,
) -> ReceiverStream<io::Result<CappedStream>> {
    let places = Arc::new(Semaphore::new(cap));
    let (sender, receiver) = mpsc::channel(128);
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => match places.clone().try_acquire_owned() {
                    Ok(place) => {
                        let _ = stream.set_nodelay(true);
                        stats.accepted.fetch_add(1, Ordering::Relaxed);
                        if sender.send(Ok(CappedStream { stream, _place: place })).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                    }
                },
                Err(error) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("accept failed: {error}; pausing");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    ReceiverStream::new(receiver)
}
