//! CPU builds of an engine (issue #55, part 2), with real processes: `--new
//! FLAGS=FILE` names builds for processors with given flags; the worker is leased the
//! best build its processor runs (a build it cannot run is never started), and a test
//! with an engine none of whose builds it runs is never leased to it, whatever its
//! priority; nor is a test that requires a flag its processor lacks
//! (`--require-cpu-flags`).

use std::time::Duration;

use crate::cluster::{job_of, start_coordinator, start_worker, token, wait_for, xq_at};
use crate::common::{TempDir, binary, client, executable};
use xq_proto::v1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_worker_plays_the_best_build_it_runs_and_none_it_cannot() {
    let dir = TempDir::new("builds");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = client(address, &token(&dir.0)).await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    // A build for a flag no processor has: started, it would fail every game.
    let broken = executable(&dir.0, "engine-future-cpu", "#!/bin/sh\nexit 3\n");
    let broken = broken.to_str().unwrap();
    let flags = xq_proto::builds::cpu_flags();
    let flag = flags.first().expect("this machine's processor lists its flags in /proc/cpuinfo");
    let games = ["games", "--games", "4", "--tc", "depth=1", "--max-plies", "40", "--no-bench"];

    // Only for the future processor, and first in line: never leased here.
    #[rustfmt::skip]
    let unrunnable = job_of(&xq_at(address, &dir.0, &[&games[..], &[
        "--priority", "5", "--new", &format!("xq_future_flag={broken}"), "--base", engine,
    ]].concat()));
    #[rustfmt::skip]
    let required = job_of(&xq_at(address, &dir.0, &[&games[..], &[
        "--priority", "5", "--require-cpu-flags", &format!("{flag},xq_future_flag"), "--new", engine, "--base", engine,
    ]].concat()));
    #[rustfmt::skip]
    let runnable = job_of(&xq_at(address, &dir.0, &[&games[..], &[
        "--new", &format!("xq_future_flag,{flag}={broken}"), "--new", &format!("{flag}={engine}"),
        "--base", engine,
    ]].concat()));

    let _worker = start_worker(&mut admin, address, dir.0.join("w0"), "w0").await;
    let limit = Duration::from_secs(300);
    let done = wait_for(&mut admin, runnable, limit, "the runnable test", |j| j.state != "running").await;
    assert_eq!((done.state.as_str(), done.units_done), ("finished", 2), "{done:?}");
    assert!(done.failures.is_empty(), "the future build was started: {:?}", done.failures);
    let totals = done.totals.unwrap();
    assert_eq!(totals.wins + totals.draws + totals.losses, 4);
    for job in [unrunnable, required] {
        let skipped = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
        assert_eq!(
            (skipped.state.as_str(), skipped.units_done, skipped.active_leases),
            ("running", 0, 0),
            "{skipped:?}"
        );
    }
}
