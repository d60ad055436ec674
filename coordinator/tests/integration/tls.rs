//! TLS: a coordinator serving TLS answers clients that trust its certificate, and
//! plaintext clients get nothing.

use tokio::net::TcpListener;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use xq_coordinator::access::listener::ConnectionCaps;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_coordinator::server::{CLIENT_TOKEN_FILE, Coordinator};
use xq_proto::v1::client_client::ClientClient;
use xq_proto::{BearerToken, v1};

use crate::common::TempDir;

#[tokio::test]
async fn tls_clients_are_served_and_plaintext_ones_are_not() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (certified.cert.pem(), certified.signing_key.serialize_pem());
    let dir = TempDir::new("tls");
    let coordinator = std::sync::Arc::new(Coordinator::open(&dir.0, None, SchedulerConfig::default()).await.unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let serving = coordinator.clone();
    let tls = Some((cert.clone().into_bytes(), key.into_bytes()));
    tokio::spawn(async move {
        serving.serve(listener, tls, ConnectionCaps::total(100), std::future::pending()).await.unwrap()
    });
    let token = std::fs::read_to_string(dir.0.join(CLIENT_TOKEN_FILE)).unwrap();

    let trusted = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&cert)).domain_name("localhost");
    let channel = Endpoint::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(trusted)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ClientClient::with_interceptor(channel, BearerToken::new(&token).unwrap());
    assert!(client.list_jobs(v1::ListJobsRequest::default()).await.unwrap().into_inner().jobs.is_empty());

    let plain = Endpoint::from_shared(format!("http://{address}")).unwrap().connect().await;
    if let Ok(channel) = plain {
        let mut client = ClientClient::with_interceptor(channel, BearerToken::new(&token).unwrap());
        assert!(client.list_jobs(v1::ListJobsRequest::default()).await.is_err(), "plaintext answered");
    }

    // A handshake begun and left hanging is given up after TLS_HANDSHAKE_WITHIN.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let start = std::time::Instant::now();
    let mut stalled = tokio::net::TcpStream::connect(address).await.unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let mut buffer = [0u8; 16];
    let limit = xq_coordinator::server::TLS_HANDSHAKE_WITHIN + std::time::Duration::from_secs(5);
    let read = tokio::time::timeout(limit, stalled.read(&mut buffer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "a stalled handshake is closed: {read:?}");
    assert!(start.elapsed() >= xq_coordinator::server::TLS_HANDSHAKE_WITHIN, "{:?}", start.elapsed());
}
