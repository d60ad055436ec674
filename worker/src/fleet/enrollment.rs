//! A machine of a volunteer: it enrolls with its user's worker key and the machine id it
//! keeps in its cache, and keeps the worker token the coordinator gives it, so that one
//! key serves every machine of the user and each machine stays the same worker across
//! restarts (its conduct and pace its own).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rand::RngCore;
use sha2::{Digest, Sha256};
use tonic::metadata::MetadataValue;
use xq_proto::v1;
use xq_proto::v1::accounts_client::AccountsClient;

use super::{FleetError, endpoint};

/// The machine's id: made once, kept in `cache`.
pub fn machine_id(cache: &Path) -> Result<String, FleetError> {
    let path = cache.join("machine-id");
    if let Ok(kept) = std::fs::read_to_string(&path)
        && !kept.trim().is_empty()
    {
        return Ok(kept.trim().to_owned());
    }
    std::fs::create_dir_all(cache).map_err(FleetError::file("creating the cache directory", cache))?;
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    let id = hex::encode(bytes);
    std::fs::write(&path, format!("{id}\n")).map_err(FleetError::file("writing the machine id", &path))?;
    Ok(id)
}

/// Where the worker token given for `key` is kept.
fn token_file(cache: &Path, key: &str) -> PathBuf {
    let key_id = &hex::encode(Sha256::digest(key.as_bytes()))[..12];
    cache.join(format!("worker-token-{key_id}"))
}

/// The worker token of this machine under `key`: the one kept in `cache`, or one the
/// coordinator gives when the machine enrolls (kept, readable by its owner only).
pub async fn worker_token(
    coordinator: &str,
    ca_cert: Option<&Path>,
    key: &str,
    cache: &Path,
    name: &str,
) -> Result<String, FleetError> {
    let kept = token_file(cache, key);
    if let Ok(token) = std::fs::read_to_string(&kept)
        && !token.trim().is_empty()
    {
        return Ok(token.trim().to_owned());
    }
    let machine_id = machine_id(cache)?;
    let channel = endpoint(coordinator, ca_cert)?.connect_lazy();
    let mut request = tonic::Request::new(v1::EnrollMachineRequest { machine_id, name: name.to_owned() });
    let bearer = MetadataValue::try_from(format!("Bearer {key}")).map_err(|_| FleetError::Token)?;
    request.metadata_mut().insert("authorization", bearer);
    let reply = AccountsClient::new(channel).enroll_machine(request).await.map_err(|status| FleetError::Refused {
        call: "EnrollMachine",
        code: status.code(),
        message: status.message().to_owned(),
    })?;
    let token = reply.into_inner().worker_token;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&kept)
        .map_err(FleetError::file("writing the worker token", &kept))?;
    file.write_all(format!("{token}\n").as_bytes()).map_err(FleetError::file("writing the worker token", &kept))?;
    Ok(token)
}
