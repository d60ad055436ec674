//! Accepting connections under caps. A process may hold only so many files; at that
//! limit `accept` fails at once, and a server that simply retries burns a core. Here a
//! connection beyond the cap is accepted and closed at once (the client sees a clean
//! refusal and backs off), and a failing `accept` (no file descriptors left) pauses
//! the loop instead of spinning. A second cap per remote host (an IPv6 /64) keeps one host (or
//! one attacker holding idle connections) from taking every place, and a connection
//! that stays silent (not even a TLS ClientHello or HTTP/2's preface) past
//! [`ConnectionCaps::first_bytes_within`] is closed, giving its place back.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::access::hosts::host;

/// How many connections are served at once, and how long a new one may stay silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionCaps {
    pub total: usize,
    pub per_address: usize,
    /// A connection that sends nothing by then is closed. Past its first bytes the TLS
    /// handshake has its own timeout and HTTP/2 its keepalive pings.
    pub first_bytes_within: Duration,
}

impl ConnectionCaps {
    /// The default wait for a new connection's first bytes.
    pub const FIRST_BYTES_WITHIN: Duration = Duration::from_secs(10);

    pub fn total(total: usize) -> Self {
        ConnectionCaps { total, per_address: total, first_bytes_within: Self::FIRST_BYTES_WITHIN }
    }
}

impl From<usize> for ConnectionCaps {
    fn from(total: usize) -> Self {
        ConnectionCaps::total(total)
    }
}

/// When an idle connection's peer is first probed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// Open connections by remote host (an IPv6 address's /64).
type PerAddress = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One address's place, given back when the connection closes.
struct AddressPlace {
    address: IpAddr,
    counts: PerAddress,
}

impl AddressPlace {
    fn take(counts: &PerAddress, address: IpAddr, cap: usize) -> Option<Self> {
        let mut map = counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let open = map.entry(address).or_default();
        if *open >= cap {
            return None;
        }
        *open += 1;
        Some(AddressPlace { address, counts: counts.clone() })
    }
}

impl Drop for AddressPlace {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(open) = map.get_mut(&self.address) {
            *open -= 1;
            if *open == 0 {
                map.remove(&self.address);
            }
        }
    }
}

/// A connection holding one of the caps' places until it closes.
pub struct CappedStream {
    stream: TcpStream,
    _place: OwnedSemaphorePermit,
    _address_place: AddressPlace,
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
    /// Connections accepted under the caps.
    pub accepted: AtomicU64,
    /// Connections closed at once because the cap was reached.
    pub refused: AtomicU64,
    /// Connections closed at once because their address had its share.
    pub refused_per_address: AtomicU64,
    /// `accept` failures (such as running out of file descriptors).
    pub errors: AtomicU64,
    /// Connections closed because they sent nothing in time.
    pub silent: AtomicU64,
}

/// Accepts connections from `listener` under `caps`.
pub fn capped_incoming(
    listener: TcpListener,
    caps: ConnectionCaps,
    stats: Arc<AcceptStats>,
) -> ReceiverStream<io::Result<CappedStream>> {
    let places = Arc::new(Semaphore::new(caps.total));
    let per_address = PerAddress::default();
    let (sender, receiver) = mpsc::channel(128);
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let Ok(place) = places.clone().try_acquire_owned() else {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let Some(address_place) = AddressPlace::take(&per_address, host(peer.ip()), caps.per_address)
                    else {
                        stats.refused_per_address.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    // A peer gone without a word (its machine off) is found by the
                    // kernel's probes, even on a connection only we write to.
                    let _ = SockRef::from(&stream).set_tcp_keepalive(&TcpKeepalive::new().with_time(TCP_KEEPALIVE));
                    stats.accepted.fetch_add(1, Ordering::Relaxed);
                    let capped = CappedStream { stream, _place: place, _address_place: address_place };
                    if sender.is_closed() {
                        return;
                    }
                    // Served once it speaks; dropped (its places with it) if it does not.
                    let (sender, stats) = (sender.clone(), stats.clone());
                    tokio::spawn(async move {
                        let mut first = [0u8; 1];
                        match tokio::time::timeout(caps.first_bytes_within, capped.stream.peek(&mut first)).await {
                            Ok(Ok(n)) if n > 0 => drop(sender.send(Ok(capped)).await),
                            _ => drop(stats.silent.fetch_add(1, Ordering::Relaxed)),
                        }
                    });
                }
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
