//! The coordinator's Prometheus metrics: counters and histograms updated where things
//! happen, gauges read off the scheduler at each scrape. `dashboards/grafana/` plots
//! exactly these names; a test checks that a real Prometheus finds every one.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// A gRPC method or an HTTP route.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: String,
}

/// A refused call: its method and why (the gRPC status code's name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub method: String,
    pub reason: String,
}

/// A job kind: "sprt", "games" or "selfplay".
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 0.1 ms to about 13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Every metric the coordinator exports.
pub struct Metrics {
    registry: Registry,
    /// Requests by method and how long they took to answer.
    pub request_seconds: HistogramFamily<MethodLabel>,
    /// Requests answered with an error, by method and status.
    pub refused: Family<RefusalLabels, Counter>,
    pub leases_issued: Counter,
    pub leases_expired: Counter,
    /// Games and self-play positions counted (each once).
    pub games: Counter,
    pub positions: Counter,
    /// Transactions of the writer: how long each commit took and how many changes
    /// each batch held.
    pub commit_seconds: Histogram,
    pub batch_changes: Histogram,
    /// Read off the scheduler at each scrape.
    pub jobs_running: Family<KindLabel, Gauge>,
    pub workers_online: Gauge,
    pub workers_known: Gauge,
    pub leases_active: Gauge,
    /// Followers of the dashboard's live stream.
    pub live_followers: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("xq");
        let request_seconds: HistogramFamily<MethodLabel> = Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "request",
            "Time to answer a request (gRPC method or HTTP route)",
            Unit::Seconds,
            request_seconds.clone(),
        );
        let refused = Family::<RefusalLabels, Counter>::default();
        registry.register("refused", "Requests answered with an error, by method and status", refused.clone());
        let leases_issued = Counter::default();
        registry.register("leases_issued", "Leases given to workers", leases_issued.clone());
        let leases_expired = Counter::default();
        registry.register("leases_expired", "Leases whose heartbeats stopped", leases_expired.clone());
        let games = Counter::default();
        registry.register("games", "Match games counted", games.clone());
        let positions = Counter::default();
        registry.register("positions", "Self-play positions stored", positions.clone());
        let commit_seconds = latency_histogram();
        registry.register_with_unit(
            "db_commit",
            "Time of one database transaction of the writer",
            Unit::Seconds,
            commit_seconds.clone(),
        );
        let batch_changes = Histogram::new(exponential_buckets(1.0, 2.0, 12));
        registry.register("writer_batch_changes", "Changes in one transaction of the writer", batch_changes.clone());
        let jobs_running = Family::<KindLabel, Gauge>::default();
        registry.register("jobs_running", "Jobs running, by kind", jobs_running.clone());
        let workers_online = Gauge::default();
        registry.register("workers_online", "Workers heard from within a lease's lifetime", workers_online.clone());
        let workers_known = Gauge::default();
        registry.register("workers_known", "Workers ever registered", workers_known.clone());
        let leases_active = Gauge::default();
        registry.register("leases_active", "Leases in flight", leases_active.clone());
        let live_followers = Gauge::default();
        registry.register("live_followers", "Browsers following the dashboard's live stream", live_followers.clone());
        Metrics {
            registry,
            request_seconds,
            refused,
            leases_issued,
            leases_expired,
            games,
            positions,
            commit_seconds,
            batch_changes,
            jobs_running,
            workers_online,
            workers_known,
            leases_active,
            live_followers,
        }
    }
}

impl Metrics {
    /// Records a request: how long it took, and its status when refused.
    pub fn observe(&self, method: &str, elapsed: Duration, refusal: Option<&str>) {
        self.request_seconds.get_or_create(&MethodLabel { method: method.to_owned() }).observe(elapsed.as_secs_f64());
        if let Some(reason) = refusal {
            self.refused.get_or_create(&RefusalLabels { method: method.to_owned(), reason: reason.to_owned() }).inc();
        }
    }

    /// The metrics in Prometheus's text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut open_metrics = String::new();
        prometheus_client::encoding::text::encode(&mut open_metrics, &self.registry)
            .expect("writing to a String cannot fail");
        prometheus_text(&open_metrics)
    }
}

/// The content type of [`Metrics::encode`]: Prometheus's text format, which every
/// Prometheus scrapes and which its own lint, `promtool check metrics`, reads.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// OpenMetrics text, as prometheus-client writes it, in Prometheus's text format. A
/// counter's family takes its sample's name, `_total` included: read as that format,
/// `# HELP xq_games` described no series and the lint found `xq_games_total` without
/// help. The `# UNIT` and `# EOF` lines, which that format lacks, go.
fn prometheus_text(open_metrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        open_metrics.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut text = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let described = ["# HELP ", "# TYPE "].into_iter().find_map(|prefix| {
            let (name, rest) = line.strip_prefix(prefix)?.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {rest}"))
        });
        text.push_str(described.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_described_under_its_sample_name() {
        let metrics = Metrics::default();
        metrics.games.inc();
        let text = metrics.encode();
        assert!(text.contains("# HELP xq_games_total Match games counted.\n# TYPE xq_games_total counter\n"), "{text}");
        assert!(text.contains("\nxq_games_total 1\n"), "{text}");
        assert!(text.contains("# TYPE xq_db_commit_seconds histogram\n"), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
    }
}
