//! Serving the connections the capped accept loop lets in: TLS when the coordinator has
//! a certificate, then HTTP/1.1 or HTTP/2, whichever the client speaks, each with
//! hyper's timers. tonic's own server gives a timer to HTTP/2 only, and hyper's HTTP/1
//! without a timer has no header-read timeout: a connection that sent one byte of a
//! request's head now and then was held for good, and twenty such held every place of
//! a coordinator capped at twenty (F6 of the 2026-11-28 review). Here a request's head
//! must be whole within [`Protocols::header_read_within`] of its start, an HTTP/2 peer
//! that stops answering pings is closed, and a TLS handshake must end in time.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;
use tower::ServiceExt;

use crate::access::listener::CappedStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The protocols' limits.
#[derive(Clone, Copy, Debug)]
pub struct Protocols {
    /// An HTTP/1 request's head (request line and headers) must arrive within this of
    /// its first byte; an idle keep-alive connection is closed after it too.
    pub header_read_within: Duration,
    /// HTTP/2: requests a connection may carry at once (a client queues the rest).
    pub max_streams: u32,
    /// HTTP/2: how often the peer is pinged, and how long its answer may take.
    pub ping_every: Duration,
    pub ping_answer_within: Duration,
    /// A TLS client that starts a handshake and stalls gives its place back after this.
    pub tls_handshake_within: Duration,
}

/// A certificate and key (PEM) that do not make a TLS server.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("the TLS certificate: {0}")]
    Certificate(String),
    #[error("the TLS key: {0}")]
    Key(String),
    #[error("the TLS certificate and key: {0}")]
    Config(#[from] tokio_rustls::rustls::Error),
}

/// A TLS acceptor for the certificate chain and key `certificate` and `key` (PEM),
/// offering HTTP/2 and HTTP/1.1.
pub fn tls_acceptor(certificate: &[u8], key: &[u8]) -> Result<TlsAcceptor, TlsError> {
    let chain = CertificateDer::pem_slice_iter(certificate)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Certificate("no certificate in the PEM".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::Key(e.to_string()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves every connection of `incoming` with `service` until `shutdown` resolves,
/// then lets open requests finish for at most `drain_within`. Each request carries
/// its connection's [`tonic::transport::server::TcpConnectInfo`] in its extensions (the client's address, for
/// the admission's and the streams' caps).
pub async fn serve<S, B>(
    mut incoming: impl Stream<Item = io::Result<CappedStream>> + Unpin,
    service: S,
    tls: Option<TlsAcceptor>,
    protocols: Protocols,
    shutdown: impl Future<Output = ()>,
    drain_within: Duration,
) where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(protocols.header_read_within).keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(protocols.max_streams)
        .keep_alive_interval(protocols.ping_every)
        .keep_alive_timeout(protocols.ping_answer_within);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            next = incoming.next() => match next {
                Some(Ok(stream)) => stream,
                Some(Err(error)) => {
                    tracing::debug!("a connection not accepted: {error}");
                    continue;
                }
                None => break,
            },
        };
        let info = stream.connect_info();
        let service = service.clone();
        let with_info = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(info.clone());
            service.clone().oneshot(request)
        });
        let (builder, watcher, tls) = (builder.clone(), graceful.watcher(), tls.clone());
        tokio::spawn(async move {
            let served = match tls {
                None => watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(stream), with_info)).await,
                Some(acceptor) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(protocols.tls_handshake_within, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(stream), with_info)).await
                }
            };
            if let Err(error) = served {
                tracing::debug!("a connection ended: {error}");
            }
        });
    }
    if tokio::time::timeout(drain_within, graceful.shutdown()).await.is_err() {
        tracing::info!("connections still open {} s after the shutdown were dropped", drain_within.as_secs());
    }
}
