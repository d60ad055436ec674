//! Long-lived streams: the dashboard's live stream and the gRPC `WatchJob`. A token is
//! checked when a stream opens, and again while it stays open: a stream ends when its
//! token is revoked (at once) or expires, so that a revocation reaches every call, not
//! only the next ones. Followers are capped, in all and per client host (an IPv6 /64), so that
//! open streams cannot take every task and socket of the coordinator ([`Places`]).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tonic::transport::server::TcpConnectInfo;

use crate::access::places::{Caps, Places};

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

impl From<FollowerCaps> for Caps {
    fn from(caps: FollowerCaps) -> Caps {
        Caps { total: caps.total, per_holder: caps.per_address }
    }
}

/// The live streams' followers, by client host.
pub type Followers = Places<IpAddr>;

/// The followers' places under `caps`.
pub fn followers(caps: FollowerCaps) -> Arc<Followers> {
    Places::new(caps.into(), "live streams", "address")
}

/// The client address of a request, from the connection info the server keeps in its
/// extensions ([`crate::access::connections::serve`]).
pub fn client_address(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions.get::<TcpConnectInfo>().and_then(TcpConnectInfo::remote_addr).as_ref().map(SocketAddr::ip)
}
