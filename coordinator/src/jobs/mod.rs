//! Jobs: what a client may ask for, checked before anything is stored, and how a job
//! reads back (results, SPRT, Elo). A folder or file a kind ([`test`], [`selfplay`],
//! [`spsa`], [`verification`], [`tournament`]); what every kind shares beside them
//! ([`checks`], [`view`]). A new kind is a new module here and a variant of [`JobSpec`].

pub mod checks;
pub mod selfplay;
pub mod spsa;
pub mod test;
pub mod tournament;
pub mod verification;
pub mod view;

use crate::jobs::selfplay::self_play_variant;
use crate::jobs::spsa::check_spsa;
use crate::jobs::test::{MatchJob, check_test};
use crate::jobs::verification::{VerificationJob, check_spec as check_verification};
use prost::Message;
use xq_proto::v1;
use xq_stats::Model;

/// The share of the fleet a job asks among the jobs of its priority when it says
/// nothing, in percent of an equal share.
pub const DEFAULT_THROUGHPUT: u32 = 100;

/// The most share of the fleet any job may ask, in percent: ten jobs' worth, so that
/// no job takes nearly every lease at its priority however its creator sets it.
pub const MAX_THROUGHPUT: u32 = 1_000;

/// How a lease's clocks are fitted to its worker's speed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scaling {
    /// Made this many times longer: our engine's bench on the worker against the
    /// coordinator's reference (1: not scaled).
    By(f64),
    /// Left to the worker, which scales them by the tested engines' own bench speed
    /// against their submitter's (`xq_proto::speed`) and names the factor in its
    /// reports.
    ByEngines,
}

/// What a job is, checked.
#[derive(Clone, Debug)]
pub enum JobSpec {
    /// Games between two engines.
    Match(Box<MatchJob>),
    /// Training data from our engine playing itself.
    SelfPlay(v1::CreateSelfPlayRequest),
    /// Games replayed under several rule sets.
    Verify(Box<VerificationJob>),
    /// A stored job this version cannot read back (its request fails today's checks,
    /// or its book no longer reads): shown, never leased.
    Unreadable(Box<Unreadable>),
}

/// A stored job that cannot be read back, and why. It stays in the lists, ended, with
/// the reason; its stored row is left as it was.
#[derive(Clone, Debug)]
pub struct Unreadable {
    /// The stored spec, as stored.
    pub stored: String,
    pub problem: String,
    /// A match's request as far as it decodes: its engines, clock and SPRT for the
    /// views (a tournament finds its pairing by the engines).
    pub request: Option<v1::CreateTestRequest>,
}

impl Unreadable {
    /// The job of `kind` stored as `stored`, which fails to read back with `problem`.
    pub fn new(kind: &str, stored: &str, problem: impl Into<String>) -> Self {
        let bytes = hex::decode(stored).ok();
        let request = bytes.and_then(|bytes| match kind {
            "selfplay" | "verify" => None,
            "spsa" => v1::CreateSpsaRequest::decode(bytes.as_slice()).ok().and_then(|r| r.test),
            _ => v1::CreateTestRequest::decode(bytes.as_slice()).ok(),
        });
        Unreadable { stored: stored.to_owned(), problem: problem.into(), request }
    }

    /// The outcome a job that was running or pending is shown with.
    pub fn outcome(&self) -> String {
        format!("stopped at start-up: this version cannot read it back: {}", self.problem)
    }
}

impl JobSpec {
    /// The games one of its units plays (a pair; a self-play batch) or verifies.
    pub fn games_per_unit(&self) -> u32 {
        match self {
            JobSpec::Match(_) => 2,
            JobSpec::SelfPlay(request) => request.spec.as_ref().map_or(0, |spec| spec.games_per_unit),
            JobSpec::Verify(job) => job.spec.games_per_unit,
            JobSpec::Unreadable(_) => 0,
        }
    }

    /// The stored form: the request, protobuf in hex.
    pub fn encode(&self) -> String {
        match self {
            JobSpec::Match(job) => match &job.spsa {
                Some(spsa) => hex::encode(spsa.request.encode_to_vec()),
                None => hex::encode(job.request.encode_to_vec()),
            },
            JobSpec::SelfPlay(request) => hex::encode(request.encode_to_vec()),
            JobSpec::Verify(job) => hex::encode(job.spec.encode_to_vec()),
            JobSpec::Unreadable(job) => job.stored.clone(),
        }
    }

    /// Reads a stored spec back (`openings` are loaded by the caller).
    pub fn decode(kind: &str, text: &str) -> Result<JobSpec, String> {
        let bytes = hex::decode(text).map_err(|e| e.to_string())?;
        match kind {
            "selfplay" => {
                Ok(JobSpec::SelfPlay(v1::CreateSelfPlayRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?))
            }
            "verify" => {
                let spec = v1::VerificationSpec::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                Ok(JobSpec::Verify(Box::new(check_verification(&spec).map_err(|e| e.to_string())?)))
            }
            "spsa" => {
                let request = v1::CreateSpsaRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                Ok(JobSpec::Match(Box::new(check_spsa(&request).map_err(|e| e.to_string())?)))
            }
            _ => {
                let request = v1::CreateTestRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
                Ok(JobSpec::Match(Box::new(check_test(&request).map_err(|e| e.to_string())?)))
            }
        }
    }

    /// What a lease of this job gives a worker to play, its clocks scaled by `scaling`
    /// (an SPSA lease's probe is added to its engines' options).
    pub fn lease_work(&self, scaling: Scaling) -> v1::lease::Work {
        match self {
            JobSpec::Match(m) => v1::lease::Work::MatchSpec(m.lease_spec(scaling)),
            JobSpec::SelfPlay(r) => v1::lease::Work::SelfPlay(r.spec.clone().unwrap_or_default()),
            JobSpec::Verify(v) => v1::lease::Work::Verification(v.spec.clone()),
            // Never leased: the scheduler leases running jobs only, and this one is not.
            JobSpec::Unreadable(_) => v1::lease::Work::Verification(v1::VerificationSpec::default()),
        }
    }

    /// One line for lists.
    pub fn summary(&self) -> String {
        match self {
            JobSpec::Match(job) if job.spsa.is_some() => {
                let spsa = job.spsa.as_ref().expect("matched");
                let test = spsa.request.test.clone().unwrap_or_default();
                let engine = engine_named(&test.new_engine);
                let names: Vec<&str> = spsa.start.parameters().iter().map(|p| p.name.as_str()).collect();
                format!("SPSA of {engine}: {}, {}, {}", names.join(", "), test.time_control, job.rules.name())
            }
            JobSpec::Match(job) => {
                let r = &job.request;
                // Time odds: each engine's clock where one has its own.
                let clocks = if xq_proto::speed::has_time_odds(&r.new_engine, &r.base_engine) {
                    let clock = |engine| xq_proto::speed::own_time_control(engine).unwrap_or(&r.time_control);
                    format!("{} vs {}", clock(&r.new_engine), clock(&r.base_engine))
                } else {
                    r.time_control.clone()
                };
                let mut text = format!(
                    "{} vs {}, {clocks}, {}",
                    engine_named(&r.new_engine),
                    engine_named(&r.base_engine),
                    job.rules.name()
                );
                if let Some(s) = &job.sprt {
                    let model = if s.model == Model::Logistic { "logistic" } else { "normalized" };
                    let trinomial = if r.sprt.as_ref().is_some_and(|s| s.trinomial) { " trinomial" } else { "" };
                    text.push_str(&format!(", SPRT [{}, {}] {model}{trinomial}", s.elo0, s.elo1));
                }
                text
            }
            JobSpec::SelfPlay(r) => {
                let s = r.spec.clone().unwrap_or_default();
                let variant = self_play_variant(&s).unwrap_or_default().name();
                let evaluation = s.net.as_ref().map_or_else(|| "handcrafted".to_owned(), |n| format!("net {}", n.name));
                format!("{variant} self-play, {} nodes, {} games a unit, {evaluation}", s.nodes, s.games_per_unit)
            }
            JobSpec::Verify(job) => job.summary(),
            JobSpec::Unreadable(job) => format!("cannot be read back by this version: {}", job.problem),
        }
    }
}

/// An engine of a match as lists name it: its name, and its net's file if it has one.
fn engine_named(engine: &Option<v1::EngineSpec>) -> String {
    match engine {
        Some(v1::EngineSpec { name, net: Some(net), .. }) => format!("{name} (net {})", net.name),
        Some(engine) => engine.name.clone(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::test::tests::request;
    use xq_engine::xiangqi::rules::RuleSet;

    #[test]
    fn good_requests_pass_and_round_trip() {
        let job = check_test(&request()).unwrap();
        assert_eq!(job.rules, RuleSet::Wxf);
        let spec = JobSpec::Match(Box::new(job));
        let JobSpec::Match(back) = JobSpec::decode("sprt", &spec.encode()).unwrap() else { panic!() };
        assert_eq!(back.request, request());
        assert!(spec.summary().contains("new vs base, 10+0.1, wxf, SPRT [0, 5]"), "{}", spec.summary());
    }
}
