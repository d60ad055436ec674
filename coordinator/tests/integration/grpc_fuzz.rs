//! Fuzzing the gRPC surface: every method of both services gets random bytes, valid
//! messages with bytes flipped, cut or inserted, and valid messages with hostile values
//! (ids past anything stored, huge counts, long strings), as one message or a stream of
//! them, with the right token, the other role's or none. Every answer must be a status
//! naming a refusal (never `Unknown`, which a panicking handler gives, nor `Internal`
//! but for tonic's own "failed to decode" of bytes that are not the message),
//! a message past the size limit is refused, and the coordinator serves normally
//! afterwards with its counts consistent.

use std::time::Duration;

use bytes::{Buf, BufMut};
use prost::Message;
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataValue;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

use crate::common::*;

/// Messages as bytes, unparsed: the fuzz decides what the server gets.
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut bytes = vec![0; src.remaining()];
        src.copy_to_slice(&mut bytes);
        Ok(Some(bytes))
    }
}

/// A method: its path, whether it takes a worker's token (else a client's), and valid
/// messages to start from.
struct Method {
    path: &'static str,
    for_worker: bool,
    valid: Vec<Vec<u8>>,
}

fn worker_method(path: &'static str, valid: Vec<Vec<u8>>) -> Method {
    Method { path, for_worker: true, valid }
}

fn client_method(path: &'static str, valid: Vec<Vec<u8>>) -> Method {
    Method { path, for_worker: false, valid }
}

/// Every method of both services.
fn methods(job: u64, lease: &v1::Lease) -> Vec<Method> {
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [2, 1])],
        cumulative: Some(totals(&[[2, 1]])),
        ..Default::default()
    };
    let capabilities = v1::Capabilities { name: "w".to_owned(), cores: 4, bench_nps: 1_000_000, ..Default::default() };
    let spec = v1::SelfPlaySpec { nodes: 100, games_per_unit: 2, ..Default::default() };
    let id = v1::JobId { job_id: job }.encode_to_vec();
    vec![
        worker_method(
            "/xq.v1.Worker/Register",
            vec![v1::RegisterRequest { capabilities: Some(capabilities) }.encode_to_vec()],
        ),
        worker_method(
            "/xq.v1.Worker/Heartbeat",
            vec![v1::HeartbeatRequest { lease_ids: vec![lease.lease_id] }.encode_to_vec()],
        ),
        worker_method("/xq.v1.Worker/Lease", vec![v1::LeaseRequest { concurrency: 1 }.encode_to_vec()]),
        worker_method("/xq.v1.Worker/ReportPairs", vec![report.encode_to_vec()]),
        worker_method(
            "/xq.v1.Worker/UploadChunk",
            vec![
                v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk: vec![1, 2, 3], games: 1 }
                    .encode_to_vec(),
            ],
        ),
        worker_method(
            "/xq.v1.Worker/ReportVerification",
            vec![
                v1::VerificationReport {
                    lease_id: lease.lease_id,
                    unit: 0,
                    report: "{\"tally\": {\"games\": 1, \"refused\": 0, \"parting\": 0, \"by_kind\": {}, \"by_articles\": {}}}\n".to_owned(),
                }
                .encode_to_vec(),
            ],
        ),
        worker_method("/xq.v1.Worker/Download", vec![v1::DownloadRequest { sha256: "ab".repeat(32) }.encode_to_vec()]),
        worker_method(
            "/xq.v1.Worker/ReportFailure",
            vec![
                v1::FailureReport {
                    lease_id: lease.lease_id,
                    kind: "crash".to_owned(),
                    engine: "new".to_owned(),
                    detail: "died".to_owned(),
                }
                .encode_to_vec(),
            ],
        ),
        client_method(
            "/xq.v1.Client/UploadArtifact",
            vec![
                v1::ArtifactPiece { name: "x".to_owned(), kind: "book".to_owned(), data: vec![b'x'; 64] }
                    .encode_to_vec(),
            ],
        ),
        client_method(
            "/xq.v1.Client/CreateTest",
            vec![v1::CreateTestRequest { pairs: 4, ..Default::default() }.encode_to_vec()],
        ),
        client_method(
            "/xq.v1.Client/CreateSelfPlay",
            vec![v1::CreateSelfPlayRequest { spec: Some(spec), units: 2, ..Default::default() }.encode_to_vec()],
        ),
        client_method(
            "/xq.v1.Client/ListJobs",
            vec![v1::ListJobsRequest { limit: 5, ..Default::default() }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/GetJob", vec![id.clone()]),
        client_method(
            "/xq.v1.Client/SetPriority",
            vec![v1::SetPriorityRequest { job_id: job, priority: 3 }.encode_to_vec()],
        ),
        client_method(
            "/xq.v1.Client/ModifyJob",
            vec![v1::ModifyJobRequest { job_id: job, pairs: Some(8), ..Default::default() }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/ResumeJob", vec![id.clone()]),
        client_method("/xq.v1.Client/ListPresets", vec![v1::ListPresetsRequest {}.encode_to_vec()]),
        client_method(
            "/xq.v1.Client/CloneTest",
            vec![v1::CloneTestRequest { job_id: job, pairs: Some(2), ..Default::default() }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/WatchJob", vec![id.clone()]),
        client_method("/xq.v1.Client/GetJobHistory", vec![id.clone()]),
        client_method(
            "/xq.v1.Client/ListPairs",
            vec![v1::ListPairsRequest { job_id: job, ..Default::default() }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/GetPair", vec![v1::PairId { job_id: job, unit: lease.units[0] }.encode_to_vec()]),
        client_method("/xq.v1.Client/ListWorkers", vec![v1::ListWorkersRequest {}.encode_to_vec()]),
        client_method("/xq.v1.Client/ListContributors", vec![v1::ListContributorsRequest {}.encode_to_vec()]),
        client_method("/xq.v1.Client/GetUserPage", vec![v1::UserName { name: "alice".to_owned() }.encode_to_vec()]),
        client_method(
            "/xq.v1.Client/PublishWorkerRelease",
            vec![
                v1::WorkerRelease {
                    version: "0.2.0".to_owned(),
                    sha256: "ab".repeat(32),
                    signature: "cd".repeat(64),
                    ..Default::default()
                }
                .encode_to_vec(),
            ],
        ),
        client_method(
            "/xq.v1.Client/CreateWorkerToken",
            vec![v1::CreateWorkerTokenRequest { name: "fuzzed".to_owned() }.encode_to_vec()],
        ),
        client_method(
            "/xq.v1.Client/SetWorkerStanding",
            vec![
                v1::SetWorkerStandingRequest { worker_id: 99, standing: "disabled".to_owned(), reason: String::new() }
                    .encode_to_vec(),
            ],
        ),
        client_method("/xq.v1.Client/DownloadGames", vec![id.clone()]),
        client_method(
            "/xq.v1.Client/StreamTrainingData",
            vec![id.clone(), v1::TrainingDataRequest { job_id: 1, present_units: vec![0, u64::MAX] }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/AddNet", vec![v1::AddNetRequest::default().encode_to_vec()]),
        client_method("/xq.v1.Client/SetNetTest", vec![v1::SetNetTestRequest::default().encode_to_vec()]),
        client_method("/xq.v1.Client/ListNets", vec![v1::ListNetsRequest::default().encode_to_vec()]),
        client_method("/xq.v1.Client/ListNetFiles", vec![v1::ListNetFilesRequest::default().encode_to_vec()]),
        client_method(
            "/xq.v1.Client/CreateSpsa",
            vec![
                v1::CreateSpsaRequest {
                    test: Some(v1::CreateTestRequest { pairs: 4, ..Default::default() }),
                    spsa: Some(v1::SpsaSpec { params: "A, 1, 0, 2, 1, 0.002".to_owned(), ..Default::default() }),
                }
                .encode_to_vec(),
            ],
        ),
        client_method(
            "/xq.v1.Client/CreateTournament",
            vec![
                v1::CreateTournamentRequest {
                    engines: vec![v1::EngineSpec::default(), v1::EngineSpec::default()],
                    settings: Some(v1::CreateTestRequest::default()),
                    ..Default::default()
                }
                .encode_to_vec(),
            ],
        ),
        client_method("/xq.v1.Client/GetTournament", vec![v1::TournamentId { tournament_id: 1 }.encode_to_vec()]),
        client_method("/xq.v1.Client/ListTournaments", vec![v1::ListTournamentsRequest { limit: 5 }.encode_to_vec()]),
        client_method(
            "/xq.v1.Client/CreateVerification",
            vec![
                v1::CreateVerificationRequest { test_job_id: job, games_per_unit: 1, ..Default::default() }
                    .encode_to_vec(),
            ],
        ),
        client_method("/xq.v1.Client/GetVerification", vec![id.clone()]),
        client_method("/xq.v1.Client/DownloadVerification", vec![id]),
        client_method(
            "/xq.v1.Client/DownloadTournamentGames",
            vec![v1::TournamentId { tournament_id: 1 }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/StopTournament", vec![v1::TournamentId { tournament_id: 1 }.encode_to_vec()]),
        client_method("/xq.v1.Client/ApproveJob", vec![v1::JobId { job_id: job }.encode_to_vec()]),
        client_method("/xq.v1.Client/StopJob", vec![v1::JobId { job_id: job + 1 }.encode_to_vec()]),
        client_method(
            "/xq.v1.Client/CreateToken",
            vec![
                v1::CreateTokenRequest { role: "submitter".to_owned(), name: "fuzz".to_owned(), expires_seconds: 60 }
                    .encode_to_vec(),
            ],
        ),
        client_method("/xq.v1.Client/ListTokens", vec![v1::ListTokensRequest {}.encode_to_vec()]),
        // A made-up id: the fuzz must not revoke the tokens it calls with.
        client_method("/xq.v1.Client/RevokeToken", vec![v1::RevokeTokenRequest { id: "0".repeat(16) }.encode_to_vec()]),
        client_method("/xq.v1.Client/ListAudit", vec![v1::ListAuditRequest { limit: 5 }.encode_to_vec()]),
        // A user of the fuzz's own: the fuzz must not revoke the admin's ('operator').
        client_method("/xq.v1.Client/ListUsers", vec![v1::ListUsersRequest {}.encode_to_vec()]),
        client_method(
            "/xq.v1.Client/CreateWorkerKey",
            vec![v1::CreateWorkerKeyRequest { name: "fuzz".to_owned() }.encode_to_vec()],
        ),
        // A made-up worker: the fuzz must not retire its own.
        client_method(
            "/xq.v1.Client/RetireMachine",
            vec![v1::RetireMachineRequest { worker_id: 999_999 }.encode_to_vec()],
        ),
        // With the client's token as the bearer: not a key, so refused, as made-up ones are.
        client_method(
            "/xq.v1.Accounts/EnrollMachine",
            vec![v1::EnrollMachineRequest { machine_id: "fuzz".to_owned(), name: "fuzz".to_owned() }.encode_to_vec()],
        ),
        client_method("/xq.v1.Client/AcceptUser", vec![fuzz_user()]),
        client_method("/xq.v1.Client/RevokeUser", vec![fuzz_user()]),
        client_method(
            "/xq.v1.Client/SetUserRole",
            vec![v1::SetUserRoleRequest { name: "fuzz-user".to_owned(), role: "approver".to_owned() }.encode_to_vec()],
        ),
        client_method(
            "/xq.v1.Accounts/Signup",
            vec![
                v1::SignupRequest { name: "fuzz-user".to_owned(), password: "fuzz password".to_owned() }
                    .encode_to_vec(),
            ],
        ),
        client_method(
            "/xq.v1.Accounts/Login",
            vec![
                v1::LoginRequest { name: "fuzz-user".to_owned(), password: "fuzz password".to_owned(), expires_seconds: 60 }
                    .encode_to_vec(),
            ],
        ),
    ]
}

fn fuzz_user() -> Vec<u8> {
    v1::UserName { name: "fuzz-user".to_owned() }.encode_to_vec()
}

/// Every method the services declare, as its path: read from the proto itself, so that
/// a method added later and not fuzzed fails the test instead of going unnoticed.
fn declared_methods() -> std::collections::BTreeSet<String> {
    let proto = include_str!("../../../proto/xq/v1/cluster.proto");
    let mut service = "";
    let mut paths = std::collections::BTreeSet::new();
    for line in proto.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("service ") {
            service = rest.trim_end_matches('{').trim();
        } else if let Some(rest) = line.strip_prefix("rpc ") {
            let name = rest.split('(').next().unwrap_or_default().trim();
            paths.insert(format!("/xq.v1.{service}/{name}"));
        }
    }
    paths
}

/// Hostile values a varint field can carry.
const VARINTS: [u64; 6] = [0, 1, u64::MAX, i64::MAX as u64, 1 << 32, u32::MAX as u64];

/// A message to send: random bytes, a mutation of a valid one, or a valid one with a
/// field appended (protobuf takes the last value of a repeated scalar field).
fn fuzzed(random: &mut Random, valid: &[Vec<u8>]) -> Vec<u8> {
    let base = &valid[random.below(valid.len())];
    match random.below(4) {
        0 => (0..random.below(300)).map(|_| random.next() as u8).collect(),
        1 | 2 => {
            let mut bytes = base.clone();
            for _ in 0..1 + random.below(4) {
                let at = if bytes.is_empty() { 0 } else { random.below(bytes.len()) };
                match random.below(4) {
                    0 if !bytes.is_empty() => bytes[at] ^= 1 << random.below(8),
                    1 if !bytes.is_empty() => {
                        bytes.remove(at);
                    }
                    2 => bytes.truncate(at),
                    _ => bytes.insert(at, random.next() as u8),
                }
            }
            bytes
        }
        _ => {
            // Field 1..15 as a varint, or as a long string of printable bytes.
            let mut bytes = base.clone();
            let field = 1 + random.below(15) as u32;
            if random.below(2) == 0 {
                prost::encoding::uint64::encode(field, &VARINTS[random.below(VARINTS.len())], &mut bytes);
            } else {
                let text = "9".repeat([0, 1, 200, 70_000][random.below(4)]);
                prost::encoding::string::encode(field, &text, &mut bytes);
            }
            bytes
        }
    }
}

/// Sends `messages` to `path` as a stream; the status it answers with (Ok if its first
/// answer came without error within the time allowed).
async fn call(
    channel: tonic::transport::Channel,
    path: &'static str,
    token: Option<&str>,
    messages: Vec<Vec<u8>>,
) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(64 << 20);
    if let Err(error) = grpc.ready().await {
        return tonic::Status::unavailable(error.to_string());
    }
    let mut request = tonic::Request::new(tokio_stream::iter(messages));
    if let Some(token) = token {
        request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {token}")).unwrap());
    }
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        // The first answer is enough: a watch sends one, then waits for changes.
        grpc.streaming(request, path, Raw).await?.into_inner().message().await?;
        Ok::<_, tonic::Status>(())
    })
    .await;
    match answered {
        Ok(Ok(())) => tonic::Status::ok(""),
        Ok(Err(status)) => status,
        Err(_) => tonic::Status::deadline_exceeded("no answer in 10 s"),
    }
}

#[tokio::test]
async fn arbitrary_messages_to_every_method_are_refused_cleanly() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let request = test_request(&mut admin, 64, None).await;
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let (mut worker, worker_token) = registered_worker_token(&served, "w1", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let methods = methods(job, &lease);
    let fuzzed_paths: std::collections::BTreeSet<String> = methods.iter().map(|m| m.path.to_owned()).collect();
    assert_eq!(fuzzed_paths, declared_methods(), "the fuzz covers exactly the declared methods");
    let channel = channel(served.address).await;
    let seed = 0x6E9C_F022;
    let mut random = Random(seed);
    let mut codes = std::collections::BTreeMap::new();
    for case in 0..4000 {
        let Method { path, for_worker, valid } = &methods[random.below(methods.len())];
        let own = if *for_worker { worker_token.as_str() } else { served.client_token.as_str() };
        let other = if *for_worker { served.client_token.as_str() } else { worker_token.as_str() };
        let token = match random.below(10) {
            0 => None,
            1 => Some(other),
            _ => Some(own),
        };
        let messages: Vec<Vec<u8>> = (0..1 + random.below(2)).map(|_| fuzzed(&mut random, valid)).collect();
        let status = call(channel.clone(), path, token, messages.clone()).await;
        let what =
            format!("case {case} (seed {seed:#x}): {path} {:?}", messages.iter().map(Vec::len).collect::<Vec<_>>());
        // tonic answers a message it cannot decode with Internal and says so; any other
        // Internal, or Unknown, would be a handler that failed.
        let undecodable = status.code() == Code::Internal && status.message().starts_with("failed to decode Protobuf");
        assert!(
            undecodable || !matches!(status.code(), Code::Internal | Code::Unknown | Code::DeadlineExceeded),
            "{what}: {status:?}"
        );
        *codes.entry(format!("{:?}", status.code())).or_insert(0u32) += 1;
    }
    // The fuzz reached the handlers' checks, not only the decoder and the tokens.
    let handled: u32 = ["Ok", "InvalidArgument", "NotFound", "PermissionDenied", "FailedPrecondition"]
        .iter()
        .filter_map(|code| codes.get(*code))
        .sum();
    assert!(handled > 300 && codes.get("InvalidArgument").is_some_and(|&n| n > 30), "{codes:?}");

    // A message past the size limit is refused before it is read whole.
    let huge = vec![0u8; xq_proto::MAX_MESSAGE_BYTES + 1];
    let status = call(channel.clone(), "/xq.v1.Worker/ReportPairs", Some(&worker_token), vec![huge]).await;
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");

    // And the coordinator serves as before, its counts what its stored units say.
    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    let penta: u64 = state.totals.unwrap().pentanomial.iter().sum();
    assert_eq!(penta, state.units_done, "{codes:?}");
    assert!(admin.list_workers(v1::ListWorkersRequest {}).await.is_ok());
}
