//! Long-lived streams: the dashboard's live stream and the gRPC `WatchJob`. A token is
//! checked when a stream opens, and again while it stays open: a stream ends when its
//! token is revoked (at once) or expires, so that a revocation reaches every call, not
//! only the next ones. Followers are capped, in all and per client host (an IPv6 /64), so that
//! open streams cannot take every task and socket of the coordinator.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tonic::transport::server::TcpConnectInfo;

use crate::access::hosts::host;

/// A stream that ends when `end` resolves, giving `last` first (a final frame saying
/// why).
pub struct UntilOutOfForce<T> {
    inner: Pin<Box<dyn Stream<Item = T> + Send>>,
    end: Pin<Box<dyn Future<Output = ()> + Send>>,
    last: Option<T>,
    ended: bool,
}

impl<T> UntilOutOfForce<T> {
    pub fn new(
        inner: impl Stream<Item = T> + Send + 'static,
        end: impl Future<Output = ()> + Send + 'static,
        last: T,
    ) -> Self {
        UntilOutOfForce { inner: Box::pin(inner), end: Box::pin(end), last: Some(last), ended: false }
    }
}

impl<T: Unpin> Stream for UntilOutOfForce<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        if !this.ended && this.end.as_mut().poll(cx).is_ready() {
            this.ended = true;
        }
        if this.ended {
            return Poll::Ready(this.last.take());
        }
        this.inner.as_mut().poll_next(cx)
    }
}

/// The caps on followers of live streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerCaps {
    pub total: usize,
    pub per_address: usize,
}

impl Default for FollowerCaps {
    /// Room for every page of a large team; one address (a NAT, a proxy) gets a share.
    fn default() -> Self {
        FollowerCaps { total: 4_096, per_address: 64 }
    }
}

/// Why a follower was turned away.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FollowersFull {
    #[error("the coordinator already serves {0} live streams, its most; try again later")]
    Total(usize),
    #[error("{address} already follows {cap} live streams, the most one address may; close one first")]
    Address { address: IpAddr, cap: usize },
}

/// The live streams' followers: how many there are, in all and by address.
#[derive(Debug)]
pub struct Followers {
    caps: FollowerCaps,
    counts: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A follower's place, given back when its stream is dropped.
#[derive(Debug)]
pub struct FollowerPlace {
    followers: Arc<Followers>,
    address: Option<IpAddr>,
}

impl Followers {
    pub fn new(caps: FollowerCaps) -> Arc<Self> {
        Arc::new(Followers { caps, counts: Mutex::new((0, HashMap::new())) })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, (usize, HashMap<IpAddr, usize>)> {
        self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A place for a follower from `address` (unknown: counted in the total only).
    pub fn join(self: &Arc<Self>, address: Option<IpAddr>) -> Result<FollowerPlace, FollowersFull> {
        let mut counts = self.counts();
        if counts.0 >= self.caps.total {
            return Err(FollowersFull::Total(self.caps.total));
        }
        let address = address.map(host);
        if let Some(address) = address {
            let open = counts.1.entry(address).or_default();
            if *open >= self.caps.per_address {
                return Err(FollowersFull::Address { address, cap: self.caps.per_address });
            }
            *open += 1;
        }
        counts.0 += 1;
        Ok(FollowerPlace { followers: self.clone(), address })
    }

    /// Followers now.
    pub fn count(&self) -> usize {
        self.counts().0
    }
}

impl Drop for FollowerPlace {
    fn drop(&mut self) {
        let mut counts = self.followers.counts();
        counts.0 -= 1;
        if let Some(address) = self.address
            && let Some(open) = counts.1.get_mut(&address)
        {
            *open -= 1;
            if *open == 0 {
                counts.1.remove(&address);
            }
        }
    }
}

/// The client address of a request, from the connection info the server keeps in its
/// extensions ([`crate::access::connections::serve`]).
pub fn client_address(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions.get::<TcpConnectInfo>().and_then(TcpConnectInfo::remote_addr).as_ref().map(SocketAddr::ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_are_capped_in_all_and_per_address_and_give_their_places_back() {
        let followers = Followers::new(FollowerCaps { total: 3, per_address: 2 });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = followers.join(Some(a)).unwrap();
        let _second = followers.join(Some(a)).unwrap();
        assert_eq!(followers.join(Some(a)).unwrap_err(), FollowersFull::Address { address: a, cap: 2 });
        let _third = followers.join(Some(b)).unwrap();
        assert_eq!(followers.join(Some(b)).unwrap_err(), FollowersFull::Total(3));
        drop(first);
        assert_eq!(followers.count(), 2);
        assert!(followers.join(Some(a)).is_ok());
    }
}
