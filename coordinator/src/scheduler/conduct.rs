//! A worker's conduct in a job: its pairs' score against the job's (the residual) and
//! its failures, read for misconduct.

use crate::scheduler::JobState;
use crate::scheduler::config::SchedulerConfig;

/// A pair's slot in a pentanomial (a self-play unit's: 0).
pub(super) fn pair_slot(points: [i64; 2]) -> usize {
    (points[0] + points[1]).clamp(0, 4) as usize
}

/// How many standard errors a worker's mean pair score lies from the other workers'
/// in one test, with the variance of all its pairs; `None` below `min_pairs` on either
/// side or when every pair scored the same.
pub fn residual(worker: &[u64; 5], all: &[u64; 5], min_pairs: u64) -> Option<f64> {
    let rest: Vec<u64> = all.iter().zip(worker).map(|(a, w)| a.saturating_sub(*w)).collect();
    let (n_worker, n_rest, n_all) = (worker.iter().sum::<u64>(), rest.iter().sum::<u64>(), all.iter().sum::<u64>());
    if n_worker < min_pairs || n_rest < min_pairs {
        return None;
    }
    let mean = |counts: &[u64], n: u64| {
        counts.iter().enumerate().map(|(k, c)| k as f64 / 4.0 * *c as f64).sum::<f64>() / n as f64
    };
    let (m_worker, m_rest, m_all) = (mean(worker, n_worker), mean(&rest, n_rest), mean(all, n_all));
    let variance =
        all.iter().enumerate().map(|(k, c)| *c as f64 * (k as f64 / 4.0 - m_all).powi(2)).sum::<f64>() / n_all as f64;
    (variance > 0.0).then(|| (m_worker - m_rest) / (variance * (1.0 / n_worker as f64 + 1.0 / n_rest as f64)).sqrt())
}

/// Why `worker`'s pairs in `job` show that it does not report its games as they fell,
/// if they do: in a test, its mean pair score against the other workers' (the
/// residual) or its pentanomial's shape against theirs; in an SPSA job, its results
/// following a parameter's flips unlike theirs; in either, its games ending by an
/// engine's failure more often than theirs.
///
/// Neither the residual nor the shape judges an SPSA job: each lease's flips tilt all
/// its pairs one way, so honest workers' means and shapes differ by more than either
/// check allows (simulated: 12% of honest workers flagged by the shape under a steep
/// gradient with leases of 64 pairs); the steering check allows for it.
pub(super) fn misconduct(config: &SchedulerConfig, job: &JobState, job_id: u64, worker: u64) -> Option<String> {
    let all = job.row.pentanomial.map(|c| c.max(0) as u64);
    let tally = job.by_worker.get(&worker).copied().unwrap_or_default();
    let spsa = job.spsa.as_ref();
    if spsa.is_none()
        && config.quarantine_z > 0.0
        && let Some(z) = residual(&tally, &all, config.quarantine_min_pairs).filter(|z| z.abs() > config.quarantine_z)
    {
        return Some(format!(
            "its pairs in job {job_id} lie {z:+.1} standard errors from the other workers' (limit {})",
            config.quarantine_z
        ));
    }
    let checks = config.conduct.as_ref()?;
    if spsa.is_none()
        && let Some(p) = checks.shape_flag(&tally, &all)
    {
        return Some(format!(
            "its pairs in job {job_id} are shaped unlike the other workers': pentanomial {tally:?} of {all:?} \
             in all, p = {p:.1e} (limit {:.0e})",
            checks.shape_p
        ));
    }
    let (mine, fleet) = (job.failures.of(worker), job.failures.all);
    if let Some(p) = checks.failures_flag(mine, fleet) {
        return Some(format!(
            "{} of its {} games in job {job_id} ended by an engine's failure, against {} of all {}: p = {p:.1e} \
             (limit {:.0e})",
            mine.abandoned, mine.games, fleet.abandoned, fleet.games, checks.failures_p
        ));
    }
    let (parameter, steering) = spsa?.steering(worker, checks)?;
    Some(format!(
        "its results in SPSA job {job_id} follow the flips of {parameter} unlike the other workers' \
         ({:+.1} standard errors, p = {:.1e} over all parameters, limit {:.0e})",
        steering.z, steering.p_value, checks.steering_p
    ))
}

#[cfg(test)]
mod tests {
    use super::residual;

    #[test]
    fn a_residual_is_the_score_gap_in_standard_errors() {
        // 120 honest pairs scoring half (slots 1, 2, 3: 30, 60, 30) and a worker's 40
        // pairs won outright: means 0.5 and 1.0; all 160 pairs' mean 0.625 and
        // variance 11.25 / 160; z = 0.5 / sqrt(0.0703125 * (1/40 + 1/120)) = 10.328.
        let z = residual(&[0, 0, 0, 0, 40], &[0, 30, 60, 30, 40], 40).unwrap();
        assert!((z - 10.328).abs() < 1e-3, "{z}");
        // The same score as the others: no residual at all; too few pairs: no judgement.
        assert_eq!(residual(&[0, 10, 20, 10, 0], &[0, 40, 80, 40, 0], 40), Some(0.0));
        assert_eq!(residual(&[0, 0, 0, 0, 39], &[0, 30, 60, 30, 39], 40), None);
        // Every pair alike: nothing to measure against.
        assert_eq!(residual(&[0, 0, 50, 0, 0], &[0, 0, 100, 0, 0], 40), None);
    }
}
