//! The checks every kind's request shares: the error that names the field at fault,
//! and the bounds of names, artifacts and units.

use crate::names::is_plain_name;
use crate::storage::artifacts::check_hash;
use xq_proto::v1;

/// The most units one job may have.
pub const MAX_UNITS: u64 = 10_000_000;

/// A request refused before anything of it is kept (a job's, a worker's registration).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct SpecError {
    /// The request field at fault.
    pub field: &'static str,
    pub problem: String,
}

pub(crate) fn bad(field: &'static str, problem: impl Into<String>) -> SpecError {
    SpecError { field, problem: problem.into() }
}

pub(crate) fn check_name(field: &'static str, text: &str, max: usize) -> Result<(), SpecError> {
    if text.len() > max || text.chars().any(char::is_control) {
        return Err(bad(field, format!("at most {max} bytes of UTF-8 and no control characters")));
    }
    Ok(())
}

/// The longest net lineage name.
pub const MAX_LINEAGE: usize = 64;

/// A net lineage's name: a net's (the registry), or the one a job plays for (the
/// loop's self-play and tests), which lists filter on.
pub(crate) fn check_lineage(field: &'static str, lineage: &str) -> Result<(), SpecError> {
    if !is_plain_name(lineage, MAX_LINEAGE, "._-") {
        return Err(bad(
            field,
            format!("'{lineage}': 1 to {MAX_LINEAGE} letters, digits, dots, dashes or underscores"),
        ));
    }
    Ok(())
}

/// The longest CPU flag a job may require or a worker declare: Linux's flag names are
/// short words (`avx512_vp2intersect`, 19 characters, is among the longest).
pub const MAX_CPU_FLAG_CHARS: usize = 32;

/// An artifact named in a request: its hash, and a name fit for logs and file names.
pub(crate) fn check_artifact(field: &'static str, artifact: &v1::ArtifactRef) -> Result<(), SpecError> {
    check_hash(&artifact.sha256).map_err(|e| bad(field, e.to_string()))?;
    check_name(field, &artifact.name, 200)?;
    if artifact.name.contains(['/', '\\']) {
        return Err(bad(field, "an artifact's name is a file name, without a path"));
    }
    Ok(())
}
