//! How a job reads back: its public view, its listing's filters, its Elo.

use crate::jobs::JobSpec;
use crate::jobs::selfplay::self_play_variant;
use crate::jobs::test::source::compare_url;
use crate::storage::rows::JobRow;
use std::collections::HashMap;
use xq_engine::variant::Variant;
use xq_proto::v1;
use xq_stats::elo_estimate;

/// What a job list's filters look at that never changes once a job is made (its text
/// already in lower case), kept with each job so that a searched list is a pass of
/// comparisons, not a view built for every job ever made (finding N4 of the security
/// review). Whether a job is running, and its kind, are read off its row.
pub struct Listing {
    /// The description and the summary, in lower case.
    text: [String; 2],
    id: String,
    time_control: String,
    engines: [String; 2],
    bounds: Option<(f64, f64)>,
    lineage: String,
}

impl Listing {
    /// The listing of a job, from its first view.
    pub fn of(job: &v1::Job) -> Listing {
        Listing {
            text: [job.description.to_lowercase(), job.summary.to_lowercase()],
            id: job.job_id.to_string(),
            time_control: job.time_control.clone(),
            engines: [job.new_engine.clone(), job.base_engine.clone()],
            bounds: job.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1)),
            lineage: job.lineage.clone(),
        }
    }

    /// Whether `name` is one of the job's engines' names.
    pub fn has_engine(&self, name: &str) -> bool {
        self.engines.iter().any(|engine| engine == name)
    }

    /// Whether the job passes `request`'s filters on what never changes; `search` is
    /// the request's search text in lower case.
    pub fn matches(&self, request: &v1::ListJobsRequest, search: &str) -> bool {
        (search.is_empty() || self.text.iter().any(|text| text.contains(search)) || self.id == search)
            && (request.time_control.is_empty() || self.time_control == request.time_control)
            && (request.engine.is_empty() || self.engines.contains(&request.engine))
            && (request.lineage.is_empty() || self.lineage == request.lineage)
            && request.elo0.is_none_or(|elo0| self.bounds.is_some_and(|b| b.0 == elo0))
            && request.elo1.is_none_or(|elo1| self.bounds.is_some_and(|b| b.1 == elo1))
    }
}

/// The Elo estimate of results (pentanomial, or losses, draws, wins), if there are any.
pub fn elo_state(results: &[u64], draw_ratio: f64) -> Option<v1::EloState> {
    if results.iter().sum::<u64>() == 0 {
        return None;
    }
    elo_estimate(results).ok().map(|e| v1::EloState {
        elo: e.elo,
        low: e.low,
        high: e.high,
        los: e.los,
        nelo: e.nelo,
        draw_ratio,
    })
}

/// The public view of a job, with the counts the scheduler keeps beside its row (its
/// active leases, reports refused, re-checks pending); an SPSA job's run is kept by the
/// scheduler (`spsa`).
pub fn job_view(
    row: &JobRow,
    spec: &JobSpec,
    (active_leases, refused_reports, rechecks_pending): (u32, u64, u64),
    spsa: Option<v1::SpsaView>,
) -> v1::Job {
    let request = match spec {
        JobSpec::Match(job) => Some(&job.request),
        JobSpec::Unreadable(job) => job.request.as_ref(),
        JobSpec::SelfPlay(_) | JobSpec::Verify(_) => None,
    };
    let penta: Vec<u64> = row.pentanomial.iter().map(|&c| c.max(0) as u64).collect();
    let wdl = row.wdl.map(|c| c.max(0) as u64);
    let games = wdl.iter().sum::<u64>();
    let sprt = match spec {
        JobSpec::Match(job) => {
            job.sprt_state(row).map(|s| v1::SprtState { llr: s.llr, lower: s.lower, upper: s.upper })
        }
        JobSpec::SelfPlay(_) | JobSpec::Verify(_) | JobSpec::Unreadable(_) => None,
    };
    let elo = elo_state(&penta, wdl[1] as f64 / games.max(1) as f64);
    let over_the_board = request.is_some().then(|| {
        let board = &row.over_the_board;
        let pentanomial: Vec<u64> = board.pentanomial.iter().map(|&c| c.max(0) as u64).collect();
        let [new_ruled_wins, base_ruled_wins] = board.ruled_wins.map(|c| c.max(0) as u64);
        let [new_forfeit_wins, base_forfeit_wins] = board.forfeit_wins.map(|c| c.max(0) as u64);
        // The draws as the board decided them: the games drawn and those won by a
        // ruling or on time.
        let draws = wdl[1] + new_ruled_wins + base_ruled_wins + new_forfeit_wins + base_forfeit_wins;
        v1::OverTheBoard {
            new_ruled_wins,
            base_ruled_wins,
            new_forfeit_wins,
            base_forfeit_wins,
            elo: elo_state(&pentanomial, draws as f64 / games.max(1) as f64),
            pentanomial,
        }
    });
    v1::Job {
        job_id: row.id as u64,
        kind: row.kind.clone(),
        state: row.state.clone(),
        outcome: row.outcome.clone(),
        description: row.description.clone(),
        priority: row.priority as i32,
        units_total: row.units_total as u64,
        units_done: row.units_done as u64,
        totals: Some(v1::Totals { wins: wdl[0], draws: wdl[1], losses: wdl[2], pentanomial: penta }),
        sprt,
        elo,
        reasons: row.reasons.iter().map(|(k, v)| (k.clone(), *v)).collect::<HashMap<_, _>>(),
        active_leases,
        positions: row.positions.max(0) as u64,
        summary: spec.summary(),
        time_control: request.map_or(String::new(), |r| r.time_control.clone()),
        rules: match spec {
            JobSpec::Match(job) => job.rules.name().to_owned(),
            JobSpec::SelfPlay(_) => String::new(),
            JobSpec::Unreadable(job) => job.request.as_ref().map_or(String::new(), |r| r.rules.clone()),
            JobSpec::Verify(job) => job.rules.iter().map(|r| r.name()).collect::<Vec<_>>().join(","),
        },
        variant: match spec {
            JobSpec::Match(job) => job.variant.name().to_owned(),
            JobSpec::SelfPlay(r) => {
                self_play_variant(&r.spec.clone().unwrap_or_default()).unwrap_or_default().name().to_owned()
            }
            JobSpec::Verify(_) => Variant::Xiangqi.name().to_owned(),
            JobSpec::Unreadable(job) => job.request.as_ref().map_or(String::new(), |r| r.variant.clone()),
        },
        new_engine: engine_name(request.and_then(|r| r.new_engine.as_ref())),
        base_engine: engine_name(request.and_then(|r| r.base_engine.as_ref())),
        sprt_spec: request.and_then(|r| r.sprt.clone()),
        created_ms: row.created_ms,
        refused_reports,
        submitter: row.submitter.clone(),
        data_removed_ms: row.data_removed_ms,
        ended_ms: row.ended_ms,
        spsa,
        // Kept by the scheduler, which sets it.
        rechecks_pending,
        over_the_board,
        // The failures workers reported: the scheduler's, which sets them.
        failures: Vec::new(),
        source: request.and_then(|r| r.source.clone()),
        compare_url: request.and_then(|r| r.source.as_ref()).and_then(compare_url).unwrap_or_default(),
        book: request.and_then(|r| r.book.clone()),
        lineage: match spec {
            JobSpec::SelfPlay(r) => r.lineage.clone(),
            _ => request.map_or(String::new(), |r| r.lineage.clone()),
        },
    }
}

fn engine_name(engine: Option<&v1::EngineSpec>) -> String {
    engine.map_or(String::new(), |e| e.name.clone())
}
