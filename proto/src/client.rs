//! The Client service as tools reach it: a connection with the bearer token (and TLS
//! when a CA is given), artifact uploads, creations named so that retries make one
//! job, and the download of a self-play job's training chunks into a directory, shared
//! by `xq` and `xq-trainer`.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::v1::accounts_client::AccountsClient;
use crate::v1::client_client::ClientClient;
use crate::{ARTIFACT_PIECE_BYTES, BearerToken, MAX_MESSAGE_BYTES, v1};

/// A connected Client service.
pub type Client = ClientClient<InterceptedService<Channel, BearerToken>>;

/// Why a coordinator could not be reached or its data not saved.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No token was given.
    #[error("give a client token: --token, XQ_TOKEN or --token-file, or log in with `xq login`")]
    NoToken,
    /// The token has characters a header cannot carry.
    #[error("the token is not printable ASCII")]
    Token,
    /// A token or certificate file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The coordinator's address is not a URL.
    #[error("the coordinator address '{0}' is not a URL")]
    Url(String),
    /// The CA certificate could not be used.
    #[error("TLS with the given CA certificate: {0}")]
    Tls(String),
    /// Nothing answered at the address.
    #[error(
        "cannot connect to the coordinator at {url}: {reason}: is `xq-coordinator serve` running there? \
         (--coordinator or XQ_COORDINATOR names it)"
    )]
    Connect {
        /// The coordinator's address.
        url: String,
        /// Why.
        reason: String,
    },
    /// The coordinator refused or failed the call.
    #[error("{}", explain(.0))]
    Status(#[from] tonic::Status),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Connects to the coordinator at `url` with a client `token`, trusting `ca_pem`
/// (a PEM certificate) for TLS when given.
pub async fn connect(url: &str, token: &str, ca_pem: Option<Vec<u8>>) -> Result<Client, ClientError> {
    let auth = BearerToken::new(token).ok_or(ClientError::Token)?;
    Ok(ClientClient::with_interceptor(channel(url, ca_pem).await?, auth)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// Connects to the Accounts service at `url` (sign-up and log-in need no token).
pub async fn accounts(url: &str, ca_pem: Option<Vec<u8>>) -> Result<AccountsClient<Channel>, ClientError> {
    Ok(AccountsClient::new(channel(url, ca_pem).await?))
}

/// A channel to the coordinator at `url`, trusting `ca_pem` for TLS when given.
async fn channel(url: &str, ca_pem: Option<Vec<u8>>) -> Result<Channel, ClientError> {
    let mut endpoint = Endpoint::from_shared(url.to_owned()).map_err(|_| ClientError::Url(url.to_owned()))?;
    if let Some(pem) = ca_pem {
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
            .map_err(|e| ClientError::Tls(e.to_string()))?;
    }
    let channel = endpoint.connect().await.map_err(|e| {
        // The innermost cause says what happened ("Connection refused"); the outer ones
        // only that a connection was tried.
        let mut cause: &dyn std::error::Error = &e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        ClientError::Connect { url: url.to_owned(), reason: cause.to_string() }
    })?;
    Ok(channel)
}

/// Where `xq login` keeps the token it was given, read when a command names no other:
/// `$XDG_CONFIG_HOME/xq/token`, else `~/.config/xq/token`.
pub fn saved_token_file() -> Option<PathBuf> {
    let config =
        std::env::var_os("XDG_CONFIG_HOME").filter(|dir| !dir.is_empty()).map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").filter(|home| !home.is_empty()).map(|home| Path::new(&home).join(".config"))
        })?;
    Some(config.join("xq").join("token"))
}

/// A warning for a token about to be sent in the clear: `url` is plain `http://` to a
/// host other than this machine's loopback, where anyone on the way reads the token
/// (review of 2026-11-28, F13). `None` for TLS or loopback.
pub fn plaintext_warning(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback());
    (!loopback).then(|| {
        format!(
            "the token goes to {url} unencrypted (plain http to another machine): anyone on the way can read it; \
             serve the coordinator with TLS (https://, --ca-cert)"
        )
    })
}

/// How a tool's command line names its coordinator: `--coordinator`, `--token` or
/// `--token-file`, and `--ca-cert`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Address<'a> {
    /// The coordinator's URL.
    pub url: &'a str,
    /// A client token.
    pub token: Option<&'a str>,
    /// A file holding the client token, when `token` is absent.
    pub token_file: Option<&'a Path>,
    /// The CA certificate (PEM) for TLS.
    pub ca_cert: Option<&'a Path>,
}

/// Connects to the coordinator at `address`, reading its token and CA files.
pub async fn connect_to(address: &Address<'_>) -> Result<Client, ClientError> {
    let read =
        |path: &Path| std::fs::read(path).map_err(|source| ClientError::Read { path: path.to_path_buf(), source });
    let token = match (address.token, address.token_file) {
        (Some(token), _) => token.to_owned(),
        (None, Some(path)) => String::from_utf8_lossy(&read(path)?).into_owned(),
        (None, None) => match saved_token_file().filter(|path| path.is_file()) {
            Some(path) => String::from_utf8_lossy(&read(&path)?).trim().to_owned(),
            None => return Err(ClientError::NoToken),
        },
    };
    let ca = address.ca_cert.map(read).transpose()?;
    connect(address.url, &token, ca).await
}

/// A coordinator's refusal in one line, with what usually mends it for the refusals a
/// newcomer meets: a token it does not know, a call beyond the token's role, a busy or
/// restarting coordinator.
pub fn explain(status: &tonic::Status) -> String {
    use tonic::Code;
    let message = status.message();
    match status.code() {
        Code::Unauthenticated => format!(
            "the coordinator refused the token ({message}): check --token, XQ_TOKEN or --token-file; an admin \
             makes tokens with `xq token create` (the first admin token is the coordinator's <data>/client-token)"
        ),
        Code::PermissionDenied => format!("the coordinator refused: {message}"),
        Code::Unavailable | Code::ResourceExhausted => {
            format!("the coordinator is busy or restarting ({message}): try again shortly")
        }
        _ => format!("the coordinator answered: {message}"),
    }
}

/// A fresh request id: 32 hex digits, from the process's random hash keys and the
/// clock (unique across clients and calls without a random-number crate).
pub fn new_request_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    let first = hasher.finish();
    hasher.write_u32(std::process::id());
    format!("{first:016x}{:016x}", hasher.finish())
}

/// `message` as a creation request named `id` (metadata [`crate::REQUEST_ID_METADATA`]);
/// an id a header cannot carry is left out, and the coordinator then makes a job per call.
pub fn named<T>(message: T, id: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = id.parse() {
        request.metadata_mut().insert(crate::REQUEST_ID_METADATA, value);
    }
    request
}

/// How often a named creation is sent before its error is the answer.
const CREATION_ATTEMPTS: u32 = 6;

/// Whether a call failed in a way a retry may mend: the coordinator busy, over a rate,
/// restarting, or the connection lost on the way.
pub fn transient(status: &tonic::Status) -> bool {
    use tonic::Code;
    matches!(
        status.code(),
        Code::Unavailable | Code::ResourceExhausted | Code::DeadlineExceeded | Code::Aborted | Code::Unknown
    )
}

/// Sends `request` named `id` through `call` (a clone of `client` and the named request
/// each time) until it is answered or fails for good, waiting 0.5 s, 1 s, 2 s ...
/// between attempts: the coordinator makes one job per name, so an answer lost on the
/// way costs a retry, never a twin.
pub async fn create_named<M, T, F, Fut>(client: &Client, request: &M, id: &str, mut call: F) -> Result<T, tonic::Status>
where
    M: Clone,
    F: FnMut(Client, tonic::Request<M>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let mut delay = Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        match call(client.clone(), named(request.clone(), id)).await {
            Ok(response) => return Ok(response.into_inner()),
            Err(status) if transient(&status) && attempt < CREATION_ATTEMPTS => {
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            Err(status) => return Err(status),
        }
    }
}

/// Uploads `bytes` as an artifact named `name` of `kind` (engine, book, net or pgn).
pub async fn upload_artifact(
    client: &mut Client,
    name: &str,
    kind: &str,
    bytes: &[u8],
) -> Result<v1::ArtifactRef, tonic::Status> {
    let mut pieces: Vec<v1::ArtifactPiece> = bytes
        .chunks(ARTIFACT_PIECE_BYTES)
        .map(|data| v1::ArtifactPiece { data: data.to_vec(), ..Default::default() })
        .collect();
    if pieces.is_empty() {
        pieces.push(v1::ArtifactPiece::default());
    }
    pieces[0].name = name.to_owned();
    pieces[0].kind = kind.to_owned();
    Ok(client.upload_artifact(tokio_stream::iter(pieces)).await?.into_inner())
}

/// Uploads a file as an artifact of `kind`, named after the file.
pub async fn upload_file(client: &mut Client, path: &Path, kind: &str) -> Result<v1::ArtifactRef, ClientError> {
    let bytes = tokio::fs::read(path).await.map_err(|source| ClientError::Read { path: path.to_owned(), source })?;
    let name = path.file_name().map_or("artifact".to_owned(), |n| n.to_string_lossy().into_owned());
    Ok(upload_artifact(client, &name, kind, &bytes).await?)
}

/// The file a job's unit's chunk is saved as.
pub fn chunk_file_name(job: u64, unit: u64) -> String {
    format!("job{job}-unit{unit:06}.xqc")
}

/// The units of `job` whose chunks `dir` holds (named by [`chunk_file_name`]).
fn present_units(dir: &Path, job: u64) -> Vec<u64> {
    let prefix = format!("job{job}-unit");
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let unit = name.strip_prefix(&prefix)?.strip_suffix(".xqc")?.parse().ok()?;
            (name == chunk_file_name(job, unit)).then_some(unit)
        })
        .collect()
}

/// What a download did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Downloaded {
    /// Chunks written now.
    pub written: usize,
    /// Chunks already in the directory (from an earlier download), left as they were
    /// and not sent again.
    pub present: usize,
}

/// Saves every training chunk of `job` into `dir`, one file a unit
/// ([`chunk_file_name`]), each written to a temporary name and renamed, so that an
/// interrupted download leaves only whole chunks and the next one adds the rest.
pub async fn download_training_data(client: &mut Client, job: u64, dir: &Path) -> Result<Downloaded, ClientError> {
    std::fs::create_dir_all(dir).map_err(|source| ClientError::Write { path: dir.to_path_buf(), source })?;
    let present_units = present_units(dir, job);
    let request = v1::TrainingDataRequest { job_id: job, present_units: present_units.clone() };
    let stream = client.stream_training_data(request).await?.into_inner();
    save_chunks(stream, job, dir, present_units.into_iter().collect()).await
}

/// Saves the chunks `stream` brings into `dir`, leaving the `present` units' files as
/// they are.
async fn save_chunks(
    mut stream: impl Stream<Item = Result<v1::TrainingChunk, tonic::Status>> + Unpin,
    job: u64,
    dir: &Path,
    present: HashSet<u64>,
) -> Result<Downloaded, ClientError> {
    let mut downloaded = Downloaded { present: present.len(), ..Downloaded::default() };
    while let Some(chunk) = stream.next().await.transpose()? {
        // A coordinator older than `present_units` sends every chunk.
        if present.contains(&chunk.unit) {
            continue;
        }
        let path = dir.join(chunk_file_name(job, chunk.unit));
        let temporary = path.with_extension("part");
        tokio::fs::write(&temporary, &chunk.chunk)
            .await
            .map_err(|source| ClientError::Write { path: temporary.clone(), source })?;
        tokio::fs::rename(&temporary, &path).await.map_err(|source| ClientError::Write { path, source })?;
        downloaded.written += 1;
    }
    Ok(downloaded)
}

#[cfg(test)]
mod tests {
    use super::plaintext_warning;

    #[test]
    fn the_present_units_are_the_job_s_whole_chunk_files() {
        let dir = std::env::temp_dir().join(format!("xq-present-units-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            super::chunk_file_name(7, 0),
            super::chunk_file_name(7, 12),
            super::chunk_file_name(17, 3),     // another job's
            "job7-unit000005.part".to_owned(), // a download cut short
            "job7-unit5.xqc".to_owned(),       // not a name the download writes
            "job7-unit-00001.xqc".to_owned(),
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let mut units = super::present_units(&dir, 7);
        units.sort();
        assert_eq!(units, [0, 12]);
        assert!(super::present_units(&dir.join("absent"), 7).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A coordinator that ignores the units the client holds (one older than
    /// `present_units`) sends them all the same: their files are left as they were and
    /// not counted as written.
    #[tokio::test]
    async fn chunks_of_units_present_are_neither_rewritten_nor_counted() {
        let dir = std::env::temp_dir().join(format!("xq-save-chunks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(super::chunk_file_name(3, 0)), b"kept").unwrap();
        let chunk = |unit: u64| Ok(super::v1::TrainingChunk { unit, chunk: format!("unit {unit}").into_bytes() });
        let stream = tokio_stream::iter([chunk(0), chunk(1)]);
        let downloaded = super::save_chunks(stream, 3, &dir, [0].into()).await.unwrap();
        assert_eq!(downloaded, super::Downloaded { written: 1, present: 1 });
        assert_eq!(std::fs::read(dir.join(super::chunk_file_name(3, 0))).unwrap(), b"kept");
        assert_eq!(std::fs::read(dir.join(super::chunk_file_name(3, 1))).unwrap(), b"unit 1");
        let failing = tokio_stream::iter([chunk(2), Err(tonic::Status::unavailable("restarted"))]);
        let error = super::save_chunks(failing, 3, &dir, Default::default()).await.unwrap_err();
        assert!(error.to_string().contains("restarted"), "{error}");
        assert_eq!(std::fs::read(dir.join(super::chunk_file_name(3, 2))).unwrap(), b"unit 2", "whole chunks stay");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_plain_http_to_another_machine_is_warned_of() {
        for quiet in ["http://127.0.0.1:7420", "http://localhost:7420/", "http://[::1]:7420", "https://xq.example.org"]
        {
            assert_eq!(plaintext_warning(quiet), None, "{quiet}");
        }
        for warned in ["http://xq.example.org:7420", "http://192.168.1.5:7420", "http://[2001:db8::1]:7420"] {
            assert!(plaintext_warning(warned).is_some_and(|w| w.contains("unencrypted")), "{warned}");
        }
    }
}
