//! Who is calling: the bearer token checked on every request, the caller's role for
//! each call, and the idempotency key a creation may carry.

use crate::access::caller::Caller;
use crate::access::tokens::{Principal, Role, TokenHash, bearer, token_hash};
use crate::scheduler::tokens::TokenRefused;
use crate::scheduler::{RequestKey, Scheduler};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tonic::{Request, Status};

/// Checks the bearer token and records who sent the request: its principal, and for a
/// user the [`Caller`].
pub fn authenticate(scheduler: Arc<Scheduler>) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut request: Request<()>| {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
            .ok_or_else(|| Status::unauthenticated("no bearer token in the authorization metadata"))?;
        let hash = token_hash(token);
        let (principal, token_id) = scheduler.authenticate_hash(&hash).map_err(|refused| match refused {
            TokenRefused::NotInForce => Status::unauthenticated(refused.to_string()),
            TokenRefused::NoRights(_) => Status::permission_denied(refused.to_string()),
        })?;
        if let Principal::Client(role) = principal {
            request.extensions_mut().insert(Caller { role, token_id });
        }
        request.extensions_mut().insert(principal);
        request.extensions_mut().insert(TokenHash(hash));
        Ok(request)
    }
}

/// The client's name for a creation request, from its metadata (1 to 128 letters,
/// digits, '-', '_' or '.'), with the request message's SHA-256.
pub(super) fn request_key<T: prost::Message>(request: &Request<T>) -> Result<Option<RequestKey>, Status> {
    let Some(value) = request.metadata().get(xq_proto::REQUEST_ID_METADATA) else { return Ok(None) };
    let id = value
        .to_str()
        .ok()
        .filter(|id| {
            (1..=128).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "{}: 1 to 128 letters, digits, '-', '_' or '.'",
                xq_proto::REQUEST_ID_METADATA
            ))
        })?;
    let digest = hex::encode(Sha256::digest(request.get_ref().encode_to_vec()));
    Ok(Some(RequestKey { id: id.to_owned(), digest }))
}

pub(super) fn worker_of<T>(request: &Request<T>) -> Result<u64, Status> {
    match request.extensions().get::<Principal>() {
        Some(Principal::Worker(id)) => Ok(*id),
        _ => Err(Status::permission_denied("this call needs a worker token")),
    }
}

/// A user's call (an admin's or a submitter's).
pub(super) fn client_of<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::permission_denied("this call needs a client token"))
}

/// An admin's call.
pub(super) fn admin_of<T>(request: &Request<T>) -> Result<Caller, Status> {
    let caller = client_of(request)?;
    if caller.role != Role::Admin {
        return Err(Status::permission_denied("this call needs an admin token"));
    }
    Ok(caller)
}
