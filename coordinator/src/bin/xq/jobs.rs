//! What every job answers to: `xq list`, `show`, `watch`, `stop`, `priority`, `approve`
//! and `pgn`, and the lines that describe a job.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::AsyncWriteExt;
use xq_proto::client::Client;
use xq_proto::v1;

/// `xq list`: the jobs `request`'s filters pass, a line each.
pub async fn list(client: &mut Client, request: v1::ListJobsRequest) -> anyhow::Result<()> {
    let lineage = request.lineage.clone();
    let jobs = client.list_jobs(request).await?.into_inner().jobs;
    // A coordinator older than the lineage filter ignores it and answers every job.
    for job in jobs.iter().filter(|job| lineage.is_empty() || job.lineage == lineage) {
        out!("{}", job_line(job));
    }
    Ok(())
}

/// `xq show`: a job's line, and its theta, source, book, reasons and over-the-board
/// results.
pub async fn show(client: &mut Client, job: u64) -> anyhow::Result<()> {
    let job = client.get_job(v1::JobId { job_id: job }).await?.into_inner();
    out!("{}", job_line(&job));
    if let Some(spsa) = &job.spsa {
        let theta: Vec<String> = spsa.parameters.iter().map(|p| format!("{}={:.2}", p.name, p.value)).collect();
        out!("  theta after {} pairs: {}", spsa.iterations, theta.join(", "));
    }
    if let Some(source) = &job.source {
        for line in source_lines(source, &job.compare_url, [&job.new_engine, &job.base_engine]) {
            out!("{line}");
        }
    }
    if let Some(book) = &job.book {
        out!("  book: {} ({})", book.name, book.sha256.get(..12).unwrap_or(&book.sha256));
    }
    if job.ended_ms > 0 && job.created_ms > 0 {
        out!("  ended {:.1} min after its creation", (job.ended_ms - job.created_ms) as f64 / 60_000.0);
    }
    if job.data_removed_ms > 0 {
        let what = if job.kind == "selfplay" { "training data" } else { "games" };
        out!("  its {what} were removed under the coordinator's retention settings; the counts remain");
    }
    let mut reasons: Vec<_> = job.reasons.iter().collect();
    reasons.sort();
    for (reason, count) in reasons {
        out!("  {reason}: {count}");
    }
    if let Some(line) = over_the_board_line(&job) {
        out!("  {line}");
    }
    for line in failure_lines(&job) {
        out!("{line}");
    }
    Ok(())
}

/// What a test tests: its repository and each side's branch and commit, the compare
/// link, and the info text, indented.
fn source_lines(source: &v1::TestSource, compare_url: &str, names: [&str; 2]) -> Vec<String> {
    let mut lines = Vec::new();
    if !source.repository.is_empty() {
        lines.push(format!("  repository: {}", source.repository));
    }
    for (name, branch, commit) in
        [(names[0], &source.new_branch, &source.new_commit), (names[1], &source.base_branch, &source.base_commit)]
    {
        let at: Vec<&str> = [branch.as_str(), commit.as_str()].into_iter().filter(|t| !t.is_empty()).collect();
        if !at.is_empty() {
            lines.push(format!("  {name}: {}", at.join(" at ")));
        }
    }
    if !compare_url.is_empty() {
        lines.push(format!("  compare: {compare_url}"));
    }
    lines.extend(source.info.lines().map(|line| format!("  | {line}")));
    lines
}

/// The failures workers reported on a job, grouped by kind and engine, each with its
/// worker and what it saw (the detail's lines indented under it).
fn failure_lines(job: &v1::Job) -> Vec<String> {
    let mut failures: Vec<&v1::ReportedFailure> = job.failures.iter().collect();
    failures.sort_by(|a, b| (&a.kind, &a.engine, a.time_ms).cmp(&(&b.kind, &b.engine, b.time_ms)));
    let mut lines = Vec::new();
    if !failures.is_empty() {
        lines.push(format!(
            "  failures reported by {} workers (none of the job's work goes to them again):",
            failures.len()
        ));
    }
    let mut group = None;
    for failure in failures {
        if group != Some((&failure.kind, &failure.engine)) {
            group = Some((&failure.kind, &failure.engine));
            let of = if failure.engine.is_empty() { String::new() } else { format!(" of engine {}", failure.engine) };
            lines.push(format!("    {}{of}:", failure.kind));
        }
        let mut detail = failure.detail.lines();
        lines.push(format!(
            "      worker {} ({}): {}",
            failure.worker_id,
            failure.worker_name,
            detail.next().unwrap_or("")
        ));
        lines.extend(detail.map(|line| format!("        {line}")));
    }
    lines
}

/// `xq stop`.
pub async fn stop(client: &mut Client, job: u64) -> anyhow::Result<()> {
    let job = client.stop_job(v1::JobId { job_id: job }).await?.into_inner();
    out!("{}", job_line(&job));
    Ok(())
}

/// `xq priority`.
pub async fn set_priority(client: &mut Client, job: u64, priority: i32) -> anyhow::Result<()> {
    let job = client.set_priority(v1::SetPriorityRequest { job_id: job, priority }).await?.into_inner();
    out!("{}", job_line(&job));
    Ok(())
}

/// `xq modify`.
pub async fn modify(client: &mut Client, request: v1::ModifyJobRequest) -> anyhow::Result<()> {
    let job = client.modify_job(request).await?.into_inner();
    out!("{}", job_line(&job));
    Ok(())
}

/// `xq resume`.
pub async fn resume(client: &mut Client, job: u64) -> anyhow::Result<()> {
    let job = client.resume_job(v1::JobId { job_id: job }).await?.into_inner();
    out!("{}", job_line(&job));
    Ok(())
}

/// `xq clone`: named like every creation, so that a retry makes one test.
pub async fn clone(client: &mut Client, request: v1::CloneTestRequest, follow: bool) -> anyhow::Result<()> {
    let id = xq_proto::client::new_request_id();
    let job = xq_proto::client::create_named(client, &request, &id, |mut client, request| async move {
        client.clone_test(request).await
    })
    .await?;
    after_submit(client, job, follow).await
}

/// `xq approve`: a submitter's job that waits for approval runs.
pub async fn approve(client: &mut Client, job: u64) -> anyhow::Result<()> {
    let job = client.approve_job(v1::JobId { job_id: job }).await?.into_inner();
    out!("job {}: {}", job.job_id, job.state);
    Ok(())
}

/// `xq pgn`: a test's games, or an event's, to a file or standard output.
pub async fn download_pgn(
    client: &mut Client,
    job: Option<u64>,
    tournament: Option<u64>,
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    let mut stream = match (job, tournament) {
        (Some(job_id), _) => client.download_games(v1::JobId { job_id }).await?.into_inner(),
        (None, Some(tournament_id)) => {
            client.download_tournament_games(v1::TournamentId { tournament_id }).await?.into_inner()
        }
        (None, None) => anyhow::bail!("name a test, or a tournament with --tournament"),
    };
    let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = match &out {
        Some(path) => {
            Box::new(tokio::fs::File::create(path).await.with_context(|| format!("creating {}", path.display()))?)
        }
        None => Box::new(tokio::io::stdout()),
    };
    while let Some(batch) = stream.message().await? {
        sink.write_all(batch.pgn.as_bytes()).await?;
    }
    sink.flush().await?;
    Ok(())
}

pub async fn after_submit(client: &mut Client, job: v1::Job, follow: bool) -> anyhow::Result<()> {
    out!("job {}: {}", job.job_id, job.summary);
    if follow { watch(client, job.job_id).await } else { Ok(()) }
}

/// One line describing a job.
pub fn job_line(job: &v1::Job) -> String {
    let totals = job.totals.clone().unwrap_or_default();
    let mut text = format!(
        "job {} [{}{}] {}: {}/{} units, W/D/L {}/{}/{}",
        job.job_id,
        job.state,
        if job.outcome.is_empty() { String::new() } else { format!(", {}", job.outcome) },
        job.summary,
        job.units_done,
        job.units_total,
        totals.wins,
        totals.draws,
        totals.losses
    );
    if job.rechecks_pending > 0 {
        text.push_str(&format!(", {} re-checks pending", job.rechecks_pending));
    }
    if job.kind == "selfplay" {
        text.push_str(&format!(", {} positions", job.positions));
    } else {
        text.push_str(&format!(", pentanomial {:?}", totals.pentanomial));
    }
    if let Some(elo) = &job.elo {
        text.push_str(&format!(
            ", Elo {:+.1} [{:+.1}, {:+.1}] LOS {:.1}%",
            elo.elo,
            elo.low,
            elo.high,
            elo.los * 100.0
        ));
    }
    if let Some(sprt) = &job.sprt {
        text.push_str(&format!(", LLR {:.2} ({:.2}, {:.2})", sprt.llr, sprt.lower, sprt.upper));
    }
    if let Some(info) = job.source.as_ref().and_then(|s| s.info.lines().next()).filter(|line| !line.is_empty()) {
        text.push_str(&format!(" — {info}"));
    }
    text
}

/// A match's wins by a repetition ruling and on time, and its results with them as
/// draws, as `xq-worker match` gives them; none while no game was won so.
pub fn over_the_board_line(job: &v1::Job) -> Option<String> {
    let board = job.over_the_board.as_ref()?;
    let mut line = String::new();
    for (how, wins) in [
        ("by a repetition ruling", [board.new_ruled_wins, board.base_ruled_wins]),
        ("on time", [board.new_forfeit_wins, board.base_forfeit_wins]),
    ] {
        if wins != [0, 0] {
            line += &format!("won {how}: {} {}, {} {}; ", job.new_engine, wins[0], job.base_engine, wins[1]);
        }
    }
    if line.is_empty() {
        return None;
    }
    line += &format!("over the board (those as draws): pentanomial {:?}", board.pentanomial);
    if let Some(elo) = &board.elo {
        line.push_str(&format!(", Elo {:+.1} [{:+.1}, {:+.1}]", elo.elo, elo.low, elo.high));
    }
    Some(line)
}

/// Off a terminal, the least time between two status lines: a log of a long test
/// stays short (a line per finished pair made hundreds of them).
const LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Follows a job until it ends; prints its last state. On a terminal a progress bar
/// shows every change; in a log a line shows the results at most every
/// [`LOG_INTERVAL`], and the last state always.
pub async fn watch(client: &mut Client, job: u64) -> anyhow::Result<()> {
    let mut stream = client.watch_job(v1::JobId { job_id: job }).await?.into_inner();
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(1000);
        bar.set_style(ProgressStyle::with_template("{bar:30} {elapsed_precise} {msg}").expect("a valid template"));
        bar
    });
    let mut last: Option<v1::Job> = None;
    let mut log = StatusLog::default();
    loop {
        let state = tokio::select! {
            state = stream.message() => state?,
            () = tokio::time::sleep_until(log.due()), if bar.is_none() && log.pending.is_some() => {
                log.flush();
                continue;
            }
        };
        let Some(state) = state else { break };
        // Progress: an SPRT's LLR between its bounds, else the units done.
        let fraction = match &state.sprt {
            Some(s) => ((s.llr - s.lower) / (s.upper - s.lower)).clamp(0.0, 1.0),
            None => state.units_done as f64 / state.units_total.max(1) as f64,
        };
        let line = job_line(&state);
        match &bar {
            Some(bar) => {
                bar.set_position((fraction * 1000.0) as u64);
                bar.set_message(line);
            }
            None => log.offer(line),
        }
        last = Some(state);
    }
    match (bar, last) {
        // The bar is cleared at the end, its last state printed in its place.
        (Some(bar), Some(state)) => {
            bar.finish_and_clear();
            out!("{}", job_line(&state));
        }
        (None, _) => log.flush(),
        (Some(_), None) => {}
    }
    Ok(())
}

/// The status lines of a watch written to a log: a line per change of the results
/// (not per lease given or returned: the stream sends both), at most one per
/// [`LOG_INTERVAL`]; a change that comes sooner waits for its turn.
#[derive(Default)]
struct StatusLog {
    printed: Option<String>,
    printed_at: Option<tokio::time::Instant>,
    pending: Option<String>,
}

impl StatusLog {
    /// When the pending line may be printed.
    fn due(&self) -> tokio::time::Instant {
        self.printed_at.map_or_else(tokio::time::Instant::now, |at| at + LOG_INTERVAL)
    }

    fn offer(&mut self, line: String) {
        if self.printed.as_ref() == Some(&line) {
            self.pending = None;
            return;
        }
        self.pending = Some(line);
        if self.due() <= tokio::time::Instant::now() {
            self.flush();
        }
    }

    /// Prints the pending line, if any, now.
    fn flush(&mut self) {
        if let Some(line) = self.pending.take() {
            eprintln!("{line}");
            self.printed = Some(line);
            self.printed_at = Some(tokio::time::Instant::now());
        }
    }
}
