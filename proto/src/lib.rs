//! The gRPC contract (`xq/v1/cluster.proto`): the Worker service that workers call and
//! the Client service that users and tools call. The coordinator and the worker meet
//! only here.

pub mod client;

/// Version 1 of the contract.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("xq.v1");
}

/// The largest message either side accepts, in bytes: big enough for an artifact
/// piece or a report of many game pairs, small enough that one request cannot
/// exhaust memory.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The size of the pieces artifacts are streamed in.
pub const ARTIFACT_PIECE_BYTES: usize = 1024 * 1024;

/// A self-play game's length when its spec leaves `max_plies` at 0.
pub const DEFAULT_SELF_PLAY_PLIES: u32 = 400;

/// The most plies a self-play game of `spec` lasts: what a worker plays and what the
/// coordinator bounds a unit's records by.
pub fn self_play_plies(spec: &v1::SelfPlaySpec) -> u32 {
    if spec.max_plies == 0 { DEFAULT_SELF_PLAY_PLIES } else { spec.max_plies }
}

/// The most records a unit of `spec` can hold: each game records at most one
/// position per ply.
pub fn self_play_unit_records(spec: &v1::SelfPlaySpec) -> u64 {
    u64::from(spec.games_per_unit) * u64::from(self_play_plies(spec))
}

/// Adds `authorization: Bearer <token>` to every call of a client.
#[derive(Clone, Debug)]
pub struct BearerToken(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl BearerToken {
    /// The interceptor for `token`; `None` if the token is not printable ASCII.
    pub fn new(token: &str) -> Option<Self> {
        format!("Bearer {}", token.trim()).parse().ok().map(BearerToken)
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.0.clone());
        Ok(request)
    }
}
