//! Worker releases (#56 part 4): what a coordinator serves so that its workers update
//! themselves, and how a worker knows the release is its operator's.
//!
//! A release is a bundle (a tar of `release`, the manifest naming its version, and the
//! `xq-worker` and `xq-engine` binaries) and a signature: the operator's ed25519 key
//! signs the bundle's version and SHA-256 ([`signed_message`]). The key's public half is
//! in each worker's configuration, so a coordinator (or anyone between it and the
//! worker) can offer a bundle but not make one a worker runs. The version a worker
//! reports is stamped into its binary when the bundle is packed ([`stamp`]): a slot of
//! the binary's read-only data that [`stamped_version`] reads back, so that the running
//! program, not a file beside it, says what it is.

pub use ed25519_dalek::VerifyingKey;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The bundle's entries, in order: the manifest (`version V`), the worker (stamped with
/// V) and the engine, each installed under this name beside the worker.
pub const MANIFEST: &str = "release";
pub const WORKER: &str = "xq-worker";
pub const ENGINE: &str = "xq-engine";

/// The longest version (bytes).
pub const MAX_VERSION: usize = 64;

/// The largest binary a bundle may carry.
pub const MAX_BINARY_BYTES: u64 = 1 << 30;

/// What begins the version slot in the binary; unique in it (checked when stamping).
const MARKER: &[u8; 16] = b"XQ-RELEASE-SLOT:";
const SLOT_LEN: usize = MARKER.len() + 1 + MAX_VERSION;

/// The version slot: the marker, the version's length (0: not stamped) and its bytes.
static RELEASE_SLOT: [u8; SLOT_LEN] = {
    let mut slot = [0u8; SLOT_LEN];
    let mut i = 0;
    while i < MARKER.len() {
        slot[i] = MARKER[i];
        i += 1;
    }
    slot
};

/// Why a release cannot be made, read or trusted.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("version '{0}': 1 to 64 letters, digits, '.', '+', '-' or '_'")]
    Version(String),
    #[error("the binary holds {0} version slots, not one (is it an xq-worker?)")]
    Slot(usize),
    #[error("{what} {}: {source}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the bundle is not a release: {0}")]
    Bundle(String),
    #[error("key: {0}")]
    Key(String),
    #[error("the signature does not match the operator's key: not this operator's release of version {version}")]
    Signature { version: String },
}

fn file_error(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ReleaseError {
    let path = path.to_owned();
    move |source| ReleaseError::File { what, path, source }
}

/// Refuses a version that is empty, too long or holds other than letters, digits and
/// `.+-_`.
pub fn check_version(version: &str) -> Result<(), ReleaseError> {
    let fine = |b: u8| b.is_ascii_alphanumeric() || b"._+-".contains(&b);
    if version.is_empty() || version.len() > MAX_VERSION || !version.bytes().all(fine) {
        return Err(ReleaseError::Version(version.to_owned()));
    }
    Ok(())
}

/// The version stamped into this program when its release was packed, if it was.
pub fn stamped_version() -> Option<String> {
    // Read through an opaque reference: the compiler would otherwise fold the slot's
    // initial (empty) contents into the code, and a stamped binary would not see it.
    version_in_slot(std::hint::black_box(&RELEASE_SLOT))
}

fn version_in_slot(slot: &[u8]) -> Option<String> {
    let length = usize::from(*slot.get(MARKER.len())?).min(MAX_VERSION);
    let start = MARKER.len() + 1;
    let version = std::str::from_utf8(slot.get(start..start + length)?).ok()?;
    (!version.is_empty()).then(|| version.to_owned())
}

/// Where the one version slot of `binary` starts.
fn slot_in(binary: &[u8]) -> Result<usize, ReleaseError> {
    let marker = &std::hint::black_box(&RELEASE_SLOT)[..MARKER.len()];
    let found: Vec<usize> =
        binary.windows(marker.len()).enumerate().filter(|(_, w)| *w == marker).map(|(i, _)| i).collect();
    match found[..] {
        [at] if at + SLOT_LEN <= binary.len() => Ok(at),
        _ => Err(ReleaseError::Slot(found.len())),
    }
}

/// The version stamped into `binary` (an xq-worker's bytes), if any.
pub fn version_of(binary: &[u8]) -> Result<Option<String>, ReleaseError> {
    let at = slot_in(binary)?;
    Ok(version_in_slot(&binary[at..at + SLOT_LEN]))
}

/// Stamps `version` into `binary`, an xq-worker's bytes.
pub fn stamp(binary: &mut [u8], version: &str) -> Result<(), ReleaseError> {
    check_version(version)?;
    let at = slot_in(binary)?;
    let slot = &mut binary[at + MARKER.len()..at + SLOT_LEN];
    slot.fill(0);
    slot[0] = version.len() as u8;
    slot[1..=version.len()].copy_from_slice(version.as_bytes());
    Ok(())
}

/// What the operator's key signs: the release's version and its bundle's SHA-256.
pub fn signed_message(version: &str, sha256: &str) -> Vec<u8> {
    format!("xq-cluster worker release\nversion {version}\nsha256 {sha256}\n").into_bytes()
}

/// A new operator key, from the operating system's randomness.
pub fn new_key() -> SigningKey {
    SigningKey::from_bytes(&rand::random())
}

/// A key's 32 bytes written in hex, if `text` holds them.
fn key_bytes(text: &str) -> Option<[u8; 32]> {
    hex::decode(text.trim()).ok()?.try_into().ok()
}

/// Reads an operator key file: the secret key's 32 bytes in hex.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, ReleaseError> {
    let text = std::fs::read_to_string(path).map_err(file_error("reading the key", path))?;
    let bytes = key_bytes(&text)
        .ok_or_else(|| ReleaseError::Key(format!("{} does not hold 32 bytes in hex", path.display())))?;
    Ok(SigningKey::from_bytes(&bytes))
}

/// Reads a public key: 32 bytes in hex.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, ReleaseError> {
    let bytes =
        key_bytes(text).ok_or_else(|| ReleaseError::Key(format!("'{}' is not 32 bytes in hex", text.trim())))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| ReleaseError::Key(e.to_string()))
}

/// The signature of a release, in hex.
pub fn sign(key: &SigningKey, version: &str, sha256: &str) -> String {
    hex::encode(key.sign(&signed_message(version, sha256)).to_bytes())
}

/// Checks that `signature` (hex) is the operator's, whose public key is `key`, over
/// `version` and `sha256`.
pub fn verify(key: &VerifyingKey, version: &str, sha256: &str, signature: &str) -> Result<(), ReleaseError> {
    let refused = || ReleaseError::Signature { version: version.to_owned() };
    let bytes: [u8; 64] = hex::decode(signature).ok().and_then(|b| b.try_into().ok()).ok_or_else(refused)?;
    key.verify(&signed_message(version, sha256), &Signature::from_bytes(&bytes)).map_err(|_| refused())
}

/// The SHA-256 of a file, in hex.
pub fn file_sha256(path: &Path) -> Result<String, ReleaseError> {
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path).map_err(file_error("opening", path))?;
    std::io::copy(&mut file, &mut hasher).map_err(file_error("reading", path))?;
    Ok(hex::encode(hasher.finalize()))
}

/// Packs a release of `version` into `out`: `worker` stamped with the version, and
/// `engine`. Returns the bundle's SHA-256.
pub fn pack(version: &str, worker: &Path, engine: &Path, out: &Path) -> Result<String, ReleaseError> {
    check_version(version)?;
    let mut worker_bytes = std::fs::read(worker).map_err(file_error("reading", worker))?;
    stamp(&mut worker_bytes, version)?;
    let engine_bytes = std::fs::read(engine).map_err(file_error("reading", engine))?;
    let file = std::fs::File::create(out).map_err(file_error("creating", out))?;
    let mut builder = tar::Builder::new(std::io::BufWriter::new(file));
    let manifest = format!("version {version}\n");
    let entries: [(&str, &[u8], u32); 3] =
        [(MANIFEST, manifest.as_bytes(), 0o644), (WORKER, &worker_bytes, 0o755), (ENGINE, &engine_bytes, 0o755)];
    for (name, bytes, mode) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        builder.append_data(&mut header, name, bytes).map_err(file_error("writing", out))?;
    }
    builder
        .into_inner()
        .and_then(|w| w.into_inner().map_err(|e| e.into_error()))
        .map_err(file_error("writing", out))?;
    file_sha256(out)
}

/// A bundle's manifest: the version it says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub version: String,
}

/// Reads the manifest of the bundle at `path`, checking the bundle's shape: the three
/// entries, in order, each a plain file of bounded size.
pub fn read_manifest(path: &Path) -> Result<Manifest, ReleaseError> {
    read_bundle(path, None)
}

/// Unpacks the bundle at `path` into `dir` (`xq-worker` and `xq-engine`, executable)
/// and returns its manifest; the worker's stamped version must be the manifest's.
pub fn unpack(path: &Path, dir: &Path) -> Result<Manifest, ReleaseError> {
    read_bundle(path, Some(dir))
}

fn read_bundle(path: &Path, into: Option<&Path>) -> Result<Manifest, ReleaseError> {
    let bad = |what: String| ReleaseError::Bundle(what);
    let file = std::fs::File::open(path).map_err(file_error("opening", path))?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(file));
    let mut manifest = None;
    let mut seen = Vec::new();
    for entry in archive.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let name = entry.path().map_err(|e| bad(e.to_string()))?.to_string_lossy().into_owned();
        let expected = [MANIFEST, WORKER, ENGINE].get(seen.len()).copied();
        if Some(name.as_str()) != expected || entry.header().entry_type() != tar::EntryType::Regular {
            return Err(bad(format!("entry '{name}' where {} belongs", expected.unwrap_or("the end"))));
        }
        let size = entry.header().size().map_err(|e| bad(e.to_string()))?;
        if size > MAX_BINARY_BYTES {
            return Err(bad(format!("{name} of {size} bytes")));
        }
        if name == MANIFEST {
            let mut text = String::new();
            entry.by_ref().take(1024).read_to_string(&mut text).map_err(|e| bad(format!("manifest: {e}")))?;
            let version = text.strip_prefix("version ").map(str::trim).unwrap_or_default().to_owned();
            check_version(&version).map_err(|e| bad(format!("manifest: {e}")))?;
            manifest = Some(Manifest { version });
        } else if let Some(dir) = into {
            let target = dir.join(&name);
            let mut bytes = Vec::with_capacity(size as usize);
            entry.read_to_end(&mut bytes).map_err(|e| bad(format!("{name}: {e}")))?;
            if name == WORKER {
                let version = manifest.as_ref().map(|m| m.version.clone());
                let stamped = version_of(&bytes).map_err(|e| bad(format!("{name}: {e}")))?;
                if stamped != version {
                    return Err(bad(format!("{name} is stamped {stamped:?}, the manifest says {version:?}")));
                }
            }
            write_executable(&target, &bytes)?;
        }
        seen.push(name);
    }
    if seen.len() != 3 {
        return Err(bad(format!("{} entries, not 3", seen.len())));
    }
    manifest.ok_or_else(|| bad("no manifest".to_owned()))
}

fn write_executable(path: &Path, bytes: &[u8]) -> Result<(), ReleaseError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, bytes).map_err(file_error("writing", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(file_error("making executable", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in binary holding one slot, as a real xq-worker does.
    fn binary() -> Vec<u8> {
        let mut bytes = b"\x7fELF and some code".to_vec();
        bytes.extend_from_slice(&RELEASE_SLOT);
        bytes.extend_from_slice(b"more data");
        bytes
    }

    #[test]
    fn a_stamped_version_reads_back_and_a_binary_without_one_slot_is_refused() {
        let mut bytes = binary();
        assert_eq!(version_of(&bytes).unwrap(), None);
        stamp(&mut bytes, "1.2.0+abc").unwrap();
        assert_eq!(version_of(&bytes).unwrap().as_deref(), Some("1.2.0+abc"));
        stamp(&mut bytes, "1.3").unwrap();
        assert_eq!(version_of(&bytes).unwrap().as_deref(), Some("1.3"), "a shorter one leaves no tail");
        assert!(matches!(stamp(&mut b"no slot here".to_vec(), "1"), Err(ReleaseError::Slot(0))));
        let mut twice = [binary(), binary()].concat();
        assert!(matches!(stamp(&mut twice, "1"), Err(ReleaseError::Slot(2))));
        for bad in ["", "1 2", "<b>", &"9".repeat(65), "1\n"] {
            assert!(matches!(stamp(&mut bytes, bad), Err(ReleaseError::Version(_))), "{bad:?}");
        }
        // This program was not stamped.
        assert_eq!(stamped_version(), None);
    }

    #[test]
    fn a_release_verifies_with_its_operator_s_key_only() {
        let key = new_key();
        let other = new_key();
        let sha = "ab".repeat(32);
        let signature = sign(&key, "1.2.0", &sha);
        verify(&key.verifying_key(), "1.2.0", &sha, &signature).unwrap();
        let public = hex::encode(key.verifying_key().to_bytes());
        verify(&parse_public_key(&public).unwrap(), "1.2.0", &sha, &signature).unwrap();
        for (version, sha, signature) in [
            ("1.2.1", sha.as_str(), signature.as_str()),
            ("1.2.0", &"cd".repeat(32), signature.as_str()),
            ("1.2.0", sha.as_str(), &sign(&other, "1.2.0", &sha)),
            ("1.2.0", sha.as_str(), "not hex"),
        ] {
            assert!(matches!(
                verify(&key.verifying_key(), version, sha, signature),
                Err(ReleaseError::Signature { .. })
            ));
        }
        assert!(parse_public_key("abcd").is_err());
    }

    #[test]
    fn a_bundle_unpacks_as_packed_and_a_misshapen_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("xq-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (worker, engine, out) = (dir.join("w"), dir.join("e"), dir.join("bundle"));
        std::fs::write(&worker, binary()).unwrap();
        std::fs::write(&engine, b"engine bytes").unwrap();
        let sha = pack("2.0.0", &worker, &engine, &out).unwrap();
        assert_eq!(sha, file_sha256(&out).unwrap());
        assert_eq!(read_manifest(&out).unwrap().version, "2.0.0");
        let into = dir.join("into");
        std::fs::create_dir_all(&into).unwrap();
        assert_eq!(unpack(&out, &into).unwrap().version, "2.0.0");
        assert_eq!(version_of(&std::fs::read(into.join(WORKER)).unwrap()).unwrap().as_deref(), Some("2.0.0"));
        assert_eq!(std::fs::read(into.join(ENGINE)).unwrap(), b"engine bytes");
        // Cut short, or not a tar at all.
        let bytes = std::fs::read(&out).unwrap();
        std::fs::write(&out, &bytes[..bytes.len() / 2]).unwrap();
        assert!(matches!(unpack(&out, &into), Err(ReleaseError::Bundle(_))));
        std::fs::write(&out, b"hello").unwrap();
        assert!(matches!(read_manifest(&out), Err(ReleaseError::Bundle(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
