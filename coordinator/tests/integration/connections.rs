//! The network surface under attack: connections beyond the caps, from one address,
//! silent, or on HTTP/2; made-up gRPC paths; live streams of revoked tokens and too
//! many followers.

use crate::common::{
    BACKENDS, Random, TempDir, client, process_memory, registered_worker_at, serve, serve_with, upload,
};
use crate::security::{config, create};
use std::time::Duration;
use tokio_stream::StreamExt;
use tonic::Code;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

#[tokio::test]
async fn connections_beyond_the_cap_are_refused_and_the_server_goes_on() {
    let served = serve_with(BACKENDS[0], config(), 2).await;
    let mut first = client(served.address, &served.client_token).await;
    let mut second = client(served.address, &served.client_token).await;
    first.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    second.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", served.address)).unwrap();
    let refused = endpoint.connect_timeout(Duration::from_secs(2)).timeout(Duration::from_secs(2)).connect().await;
    let third_failed = match refused {
        Err(_) => true,
        Ok(channel) => {
            let mut third = xq_proto::v1::client_client::ClientClient::with_interceptor(
                channel,
                xq_proto::BearerToken::new(&served.client_token).unwrap(),
            );
            third.list_jobs(v1::ListJobsRequest::default()).await.is_err()
        }
    };
    assert!(third_failed, "a third connection is served");
    assert!(served.coordinator.accept_stats.refused.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    // The first two still work; when one closes, a new connection is served.
    first.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    drop(second);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut fourth = client(served.address, &served.client_token).await;
    fourth.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
}

/// One address may hold only its share of the connections: past it, its connections
/// are closed at once while other addresses are still served.
#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let caps = xq_coordinator::access::listener::ConnectionCaps {
        per_address: 2,
        ..xq_coordinator::access::listener::ConnectionCaps::total(100)
    };
    let served = serve_with(BACKENDS[0], config(), caps).await;
    let port = served.address.port();
    // A connection is served when the server answers the HTTP/2 preface with its own
    // settings; a refused one is closed without a byte.
    let open = |from: &'static str| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(format!("127.0.0.1:{port}").parse().unwrap()).await.unwrap();
        stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
        let mut buffer = [0u8; 64];
        let served = matches!(
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await,
            Ok(Ok(n)) if n > 0
        );
        (stream, served)
    };
    let (first, served_first) = open("127.0.0.1").await;
    let (_second, served_second) = open("127.0.0.1").await;
    assert!(served_first && served_second);
    let (_third, served_third) = open("127.0.0.1").await;
    assert!(!served_third, "a third connection from one address");
    let (_other, served_other) = open("127.0.0.2").await;
    assert!(served_other, "another address is still served");
    assert_eq!(served.coordinator.accept_stats.refused_per_address.load(std::sync::atomic::Ordering::Relaxed), 1);
    // A closed connection gives its address's place back.
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(open("127.0.0.1").await.1, "the place is given back");
}

/// A connection that says nothing is closed after `first_bytes_within`, and its place
/// goes to the next; one that speaks is served.
#[tokio::test]
async fn silent_connections_are_closed_and_give_their_place_back() {
    use tokio::io::AsyncReadExt;
    let caps = xq_coordinator::access::listener::ConnectionCaps {
        total: 1,
        per_address: 1,
        first_bytes_within: Duration::from_millis(500),
    };
    let served = serve_with(BACKENDS[0], config(), caps).await;
    let start = std::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(served.address).await.unwrap();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buffer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed, not left open: {read:?}");
    assert!(start.elapsed() >= Duration::from_millis(500), "not before its time: {:?}", start.elapsed());
    assert_eq!(served.coordinator.accept_stats.silent.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Its place is free again for a client that speaks.
    let mut admin = client(served.address, &served.client_token).await;
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
}

/// Attack (F6 of the review of 2026-11-28): connections that send one byte of a
/// request's head and then another now and then, never finishing it. Served by tonic's
/// own server they were held for good (HTTP/1 had no header-read timer), and twenty
/// held every place of a coordinator capped at twenty while a normal client was
/// refused. Now each is closed once its head has taken `HEADER_READ_WITHIN`, its place
/// given back, and so is a keep-alive connection left idle after a request.
#[tokio::test]
async fn connections_that_trickle_a_request_head_are_closed_and_give_their_places_back() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use xq_coordinator::server::HEADER_READ_WITHIN;
    const HELD: usize = 3;
    let caps = xq_coordinator::access::listener::ConnectionCaps {
        total: HELD + 1,
        ..xq_coordinator::access::listener::ConnectionCaps::total(HELD + 1)
    };
    let served = serve_with(BACKENDS[0], config(), caps).await;
    let address = served.address;
    let start = std::time::Instant::now();
    // Each trickler writes a byte of its head every 300 ms and says when the server
    // closed its connection.
    let trickle = || {
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            let head =
                b"GET /api/v1/jobs HTTP/1.1\r\nHost: coordinator\r\nX-Padding: ".iter().chain(std::iter::repeat(&b'a'));
            // Given up (and so failing the test) well after the head's time.
            let give_up = start + HEADER_READ_WITHIN * 2;
            for &byte in head {
                if std::time::Instant::now() > give_up || stream.write_all(&[byte]).await.is_err() {
                    break;
                }
                let mut answer = [0u8; 64];
                match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut answer)).await {
                    Err(_) => continue,
                    Ok(Ok(n)) if n > 0 => panic!("answered before its head ended: {:?}", &answer[..n]),
                    Ok(_) => break,
                }
            }
            start.elapsed()
        })
    };
    let tricklers: Vec<_> = (0..HELD).map(|_| trickle()).collect();
    // One request on a keep-alive connection, answered, then nothing more.
    let mut idle = tokio::net::TcpStream::connect(address).await.unwrap();
    idle.write_all(b"GET /metrics HTTP/1.1\r\nHost: coordinator\r\n\r\n").await.unwrap();
    let mut answer = vec![0u8; 1 << 16];
    let n = idle.read(&mut answer).await.unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..n.min(200)]));
    let idle_since = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // While they hold every place, another connection is closed at once: the attack holds.
    let mut refused = tokio::net::TcpStream::connect(address).await.unwrap();
    let _ = refused.write_all(b"GET /metrics HTTP/1.1\r\nHost: coordinator\r\n\r\n").await;
    let read = tokio::time::timeout(Duration::from_secs(5), refused.read(&mut answer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "a connection past the cap is served: {read:?}");
    for trickler in tricklers {
        let closed_after = trickler.await.unwrap();
        assert!(
            closed_after >= HEADER_READ_WITHIN - Duration::from_millis(500)
                && closed_after <= HEADER_READ_WITHIN + Duration::from_secs(3),
            "a trickling connection closed after {closed_after:?}, its head allowed {HEADER_READ_WITHIN:?}"
        );
    }
    let read = tokio::time::timeout(HEADER_READ_WITHIN + Duration::from_secs(5), idle.read(&mut answer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "an idle keep-alive connection left open: {read:?}");
    assert!(
        idle_since.elapsed() <= HEADER_READ_WITHIN + Duration::from_secs(3),
        "closed after {:?}",
        idle_since.elapsed()
    );
    // Their places are back: a client is served.
    let mut admin = client(served.address, &served.client_token).await;
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
}

/// The server tells every HTTP/2 client how many requests a connection may carry at once.
#[tokio::test]
async fn http2_connections_are_told_their_stream_limit() {
    let served = serve(BACKENDS[0], config()).await;
    let tcp = tokio::net::TcpStream::connect(served.address).await.unwrap();
    let (_send, mut connection) = h2::client::handshake(tcp).await.unwrap();
    // The server's SETTINGS arrive with the first frames it sends.
    let settings = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let limit = connection.max_concurrent_send_streams();
            if limit != usize::MAX {
                return limit;
            }
            // Drives the connection for a moment: it reads the server's frames.
            let _ = tokio::time::timeout(Duration::from_millis(50), &mut connection).await;
        }
    })
    .await
    .expect("the server's settings within 5 s");
    assert_eq!(settings, xq_coordinator::server::MAX_STREAMS as usize);
}

/// The value of the metric line `name` (0 when absent).
fn metric(text: &str, name: &str) -> u64 {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0)
}

/// Attack: every request path under `/xq.v1.` became a metric label, before any token
/// was checked, so 3,000 GETs of made-up paths added 17 MB to `/metrics`. Now only the
/// contract's methods and the dashboard's routes are labels; the rest count as one.
#[tokio::test]
async fn made_up_grpc_paths_count_under_one_label_and_do_not_grow_the_metrics() {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client as HttpClient;
    use xq_coordinator::api::http::UNMATCHED;

    let served = serve(BACKENDS[0], config()).await;
    let http = HttpClient::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let get = |path: String| {
        let uri: http::Uri = format!("http://{}{path}", served.address).parse().unwrap();
        let http = http.clone();
        async move { http.get(uri).await.unwrap().into_body().collect().await.unwrap().to_bytes() }
    };
    let unmatched = format!("xq_request_seconds_count{{method=\"{UNMATCHED}\"}}");
    let before = String::from_utf8(get("/metrics".to_owned()).await.to_vec()).unwrap();

    const SENT: u64 = 3_000;
    let mut random = Random(0x5eed_1abe1);
    let mut made_up = Vec::new();
    for i in 0..SENT {
        let service = ["Worker", "Client", "Nothing"][i as usize % 3];
        let path = format!("/xq.v1.{service}/M{:016x}", random.next());
        get(path.clone()).await;
        made_up.push(path);
    }
    let after = String::from_utf8(get("/metrics".to_owned()).await.to_vec()).unwrap();
    assert_eq!(metric(&after, &unmatched), metric(&before, &unmatched) + SENT, "of {} bytes", after.len());
    // One label's lines (a histogram, the refusals by status) and longer counts: a
    // few kilobytes, where a label per path added 17 MB.
    let grown = after.len().saturating_sub(before.len());
    assert!(grown < 16 * 1024, "/metrics grew by {grown} bytes, from {} to {}", before.len(), after.len());
    assert!(made_up.iter().all(|path| !after.contains(path.as_str())), "a made-up path became a label");

    // A method of the contract still has its own label.
    let mut admin = client(served.address, &served.client_token).await;
    admin.list_jobs(v1::ListJobsRequest::default()).await.unwrap();
    let metrics = String::from_utf8(get("/metrics".to_owned()).await.to_vec()).unwrap();
    assert_eq!(metric(&metrics, "xq_request_seconds_count{method=\"/xq.v1.Client/ListJobs\"}"), 1, "{metrics}");
    assert!(xq_proto::GRPC_METHODS.contains(&"/xq.v1.Worker/Lease"), "{:?}", xq_proto::GRPC_METHODS);
}

/// An HTTP/1.1 GET of the live stream from the local address `from`: its status, and
/// its body while it is open.
async fn follow(served: &crate::common::Served, from: &str, headers: &[(&str, &str)]) -> (u16, hyper::body::Incoming) {
    use http_body_util::Full;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_local_address(Some(from.parse().unwrap()));
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<bytes::Bytes>>(connector);
    let mut builder = http::Request::builder().uri(format!("http://{}/api/v1/events", served.address));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = client.request(builder.body(Full::default()).unwrap()).await.unwrap();
    (response.status().as_u16(), response.into_body())
}

/// The text a live stream sends until it ends, or `None` if it is still open after
/// `within`.
async fn until_end(mut body: hyper::body::Incoming, within: Duration) -> Option<String> {
    use http_body_util::BodyExt;
    let mut text = String::new();
    tokio::time::timeout(within, async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
            }
        }
    })
    .await
    .ok()
    .map(|()| text)
}

/// A WatchJob stream's next item, or `None` if it has none within `within`.
async fn next_within(
    stream: &mut tonic::Streaming<v1::Job>,
    within: Duration,
) -> Option<Option<Result<v1::Job, tonic::Status>>> {
    tokio::time::timeout(within, stream.next()).await.ok()
}

/// A private dashboard (as by default off loopback), served in this process.
async fn serve_private(config: SchedulerConfig) -> crate::common::Served {
    crate::common::serve_set(config, |coordinator| {
        coordinator.dashboard_read = xq_coordinator::api::http::ReadAccess::Token
    })
    .await
}

/// Streams check their token while they stay open: revoking a token ends the live
/// stream and the WatchJob streams it opened within a couple of seconds (where they
/// used to run for as long as the client liked), and an expiring token's too; streams
/// of other tokens go on.
#[tokio::test]
async fn a_revoked_or_expired_token_ends_the_streams_it_opened() {
    let served = serve_private(config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 100).await.job_id;
    let token = |name: &str, expires_seconds| v1::CreateTokenRequest {
        role: "submitter".to_owned(),
        name: name.to_owned(),
        expires_seconds,
    };
    let alice = admin.create_token(token("alice", 0)).await.unwrap().into_inner();
    let brief = admin.create_token(token("brief", 1)).await.unwrap().into_inner();
    let bearer = format!("Bearer {}", alice.token);
    let (status, alice_live) = follow(&served, "127.0.0.1", &[("authorization", &bearer)]).await;
    assert_eq!(status, 200);
    let cookie = format!("xq_session=t:{}", served.client_token);
    let (status, admin_live) = follow(&served, "127.0.0.1", &[("cookie", &cookie)]).await;
    assert_eq!(status, 200);
    let watch = |token: String| async move {
        let mut watcher = client(served.address, &token).await;
        watcher.watch_job(v1::JobId { job_id: job }).await.unwrap().into_inner()
    };
    let mut alice_watch = watch(alice.token.clone()).await;
    let mut brief_watch = watch(brief.token.clone()).await;
    let mut admin_watch = watch(served.client_token.clone()).await;
    for stream in [&mut alice_watch, &mut brief_watch, &mut admin_watch] {
        let first = next_within(stream, Duration::from_secs(5)).await.expect("the job at once");
        assert_eq!(first.unwrap().unwrap().job_id, job);
    }

    admin.revoke_token(v1::RevokeTokenRequest { id: alice.id.clone() }).await.unwrap();
    let revoked_at = std::time::Instant::now();
    let text = until_end(alice_live, Duration::from_secs(2)).await.expect("the live stream ends");
    assert!(text.contains("event: revoked"), "{text:?}");
    let last = next_within(&mut alice_watch, Duration::from_secs(2)).await.expect("WatchJob ends");
    let status = last.expect("a last status").unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("revoked"), "{}", status.message());
    assert!(matches!(next_within(&mut alice_watch, Duration::from_secs(2)).await, Some(None)), "then it ends");
    assert!(revoked_at.elapsed() < Duration::from_secs(3));
    // The expiring token's stream ends at its expiry.
    let last = next_within(&mut brief_watch, Duration::from_secs(4)).await.expect("the expired stream ends");
    assert_eq!(last.expect("a last status").unwrap_err().code(), Code::Unauthenticated);
    // The admin's streams go on.
    assert!(until_end(admin_live, Duration::from_millis(1500)).await.is_none(), "the admin's live stream is open");
    assert!(next_within(&mut admin_watch, Duration::from_millis(500)).await.is_none(), "the admin's WatchJob too");
    admin.stop_job(v1::JobId { job_id: job }).await.unwrap();
    let stopped = next_within(&mut admin_watch, Duration::from_secs(5)).await.unwrap().unwrap().unwrap();
    assert_eq!(stopped.state, "stopped");
}

/// Live-stream followers (the dashboard's and WatchJob's together) are capped in all
/// and per client address: one past a cap is refused with 429 or ResourceExhausted,
/// saying which cap, while those already following and every other request are
/// served; a follower who leaves gives its place back.
#[tokio::test]
async fn live_stream_followers_are_capped_in_all_and_per_address() {
    let followers = xq_coordinator::access::streams::FollowerCaps { total: 3, per_address: 2 };
    let served = serve(BACKENDS[0], SchedulerConfig { followers, ..config() }).await;
    let mut admin = client(served.address, &served.client_token).await;
    let job = create(&mut admin, 100).await.job_id;
    let (status, first) = follow(&served, "127.0.0.1", &[]).await;
    assert_eq!(status, 200);
    let (status, _second) = follow(&served, "127.0.0.1", &[]).await;
    assert_eq!(status, 200);
    // A third from the same address: refused, on either kind of stream.
    let (status, body) = follow(&served, "127.0.0.1", &[]).await;
    let text = until_end(body, Duration::from_secs(5)).await.unwrap();
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("127.0.0.1 already has 2 live streams open"), "{text}");
    let status = admin.watch_job(v1::JobId { job_id: job }).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // Another address gets the last place in all.
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", served.address))
        .unwrap()
        .local_address(Some("127.0.0.2".parse().unwrap()));
    let token = xq_proto::BearerToken::new(&served.client_token).unwrap();
    let mut elsewhere =
        xq_proto::v1::client_client::ClientClient::with_interceptor(endpoint.connect().await.unwrap(), token);
    let mut watching = elsewhere.watch_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!(watching.next().await.unwrap().unwrap().job_id, job);
    let (status, body) = follow(&served, "127.0.0.3", &[]).await;
    let text = until_end(body, Duration::from_secs(5)).await.unwrap();
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("already serves 3 live streams"), "{text}");
    // Everything else is served.
    assert!(admin.list_jobs(v1::ListJobsRequest::default()).await.is_ok());
    let url = format!("http://{}/api/v1/jobs", served.address);
    assert_eq!(crate::dashboard::request("GET", &url, &[], "").await.0, 200);
    // A follower who leaves gives its place back.
    drop(first);
    let start = std::time::Instant::now();
    loop {
        let (status, _again) = follow(&served, "127.0.0.1", &[]).await;
        if status == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the place was not given back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The review's download hold (2026-11-28, F2): ten workers each open 100 Download
/// streams of a 10 MB artifact on a real coordinator process, each on a connection of
/// its own, and read none. A token holds at most 64 downloads open (the rest are
/// refused, naming the cap); pieces are read only as the reader takes them, so over
/// the 640 held the coordinator's peak memory grows by less than 128 MB (four 1 MiB
/// pieces read ahead a stream took it past 3.5 GB) and it keeps no file open for them;
/// a stream given up gives its place back; then a stream, read, still gives the
/// artifact whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_downloads_hold_neither_pieces_nor_files() {
    let dir = TempDir::new("download-hold");
    let (coordinator, address) = crate::cluster::start_coordinator(&dir.0, 0, 600).await;
    let pid = coordinator.id().unwrap();
    let token = crate::cluster::token(&dir.0);
    let mut admin = client(address, &token).await;
    let bytes: Vec<u8> = (0..10u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let artifact = upload(&mut admin, "held", "engine", &bytes).await.unwrap();
    let open_files = || std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let (memory_before, files_before) = (process_memory(pid, "VmHWM"), open_files());
    let request = || v1::DownloadRequest { sha256: artifact.sha256.clone() };
    let mut held = Vec::new();
    let mut last_worker = None;
    for index in 0..10 {
        let (mut connection, _) = registered_worker_at(address, &token, &format!("holder-{index}"), &[], 1).await;
        for attempt in 0..100 {
            match connection.download(request()).await {
                Ok(stream) => held.push(stream.into_inner()),
                Err(refused) => {
                    assert!(attempt >= 64, "refused at {attempt}: {refused:?}");
                    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
                    let expected = "already has 64 downloads open, the most one token may";
                    assert!(
                        refused.message().starts_with("worker ") && refused.message().contains(expected),
                        "{refused:?}"
                    );
                }
            }
        }
        last_worker = Some(connection);
    }
    assert_eq!(held.len(), 640, "64 held a token, the rest refused");
    // Time for whatever the coordinator would read ahead to be read.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (memory, files) = (process_memory(pid, "VmHWM"), open_files());
    eprintln!(
        "1,000 downloads asked, 640 held unread: peak memory {} MB before, {} MB after; open files {files_before} before, {files} after",
        memory_before >> 20,
        memory >> 20
    );
    assert!(
        memory < memory_before + (128 << 20),
        "peak memory {} MB before, {} MB after",
        memory_before >> 20,
        memory >> 20
    );
    assert!(
        files < files_before + 20,
        "{files_before} files open before, {files} with the streams held (ten connections)"
    );
    // A stream given up gives its place back: the last worker opens another.
    drop(held.pop());
    held.push(last_worker.unwrap().download(request()).await.expect("a place given back").into_inner());
    // The others dropped first: their unread pieces hold the connection's window.
    let mut stream = held.pop().unwrap();
    drop(held);
    let mut whole = Vec::new();
    while let Some(piece) = stream.next().await {
        whole.extend_from_slice(&piece.unwrap().data);
    }
    assert!(whole == bytes, "the artifact, read, is whole: {} of {} bytes", whole.len(), bytes.len());
}
