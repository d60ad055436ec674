//! An SPSA job's setup: what the match it plays carries of it (the request and the
//! run's start), apart from the checks, so that a test names it without naming SPSA's
//! logic.

use xq_proto::v1;
use xq_stats::spsa::Tuner;

/// An SPSA job as it was asked for, and its run's start.
#[derive(Clone, Debug)]
pub struct SpsaSetup {
    /// The request, stored as the job's spec.
    pub request: v1::CreateSpsaRequest,
    /// The run at iteration 0.
    pub start: Tuner,
}
