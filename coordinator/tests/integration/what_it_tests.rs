//! Tests that say what they test (issue #55, part 4), from the command line to the
//! lists: engine names, the repository, each side's branch and commit and an info
//! text given to `xq games` come back from `xq show` (with the compare link of a known
//! forge) and the JSON API, and `xq list` filters by engine name and by submitter; a
//! preset (`xq presets`) fills what a test's flags leave unset.

use crate::cluster::{start_coordinator, xq_at, xq_refused};
use crate::common::{TempDir, binary};
use crate::dashboard::get_json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_s_names_source_and_info_are_listed_shown_and_filtered() {
    let dir = TempDir::new("what-it-tests");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    #[rustfmt::skip]
    let submitted = xq_at(address, &dir.0, &[
        "games", "--games", "2", "--tc", "depth=2", "--no-bench",
        "--new", engine, "--base", engine, "--new-name", "xq-kings", "--base-name", "xq-master",
        "--repo", "https://github.com/owner/xq", "--new-branch", "kings", "--new-commit", "9f1c2ab",
        "--base-branch", "master", "--info", "King safety retuned.\nSTC first.",
    ]);
    let job = crate::cluster::job_of(&submitted);
    assert!(submitted.contains("xq-kings vs xq-master"), "{submitted}");

    let shown = xq_at(address, &dir.0, &["show", &job.to_string()]);
    for line in [
        "  repository: https://github.com/owner/xq\n",
        "  xq-kings: kings at 9f1c2ab\n",
        "  xq-master: master\n",
        "  compare: https://github.com/owner/xq/compare/master...9f1c2ab\n",
        "  | King safety retuned.\n  | STC first.\n",
    ] {
        assert!(shown.contains(line), "{line:?} in {shown}");
    }
    let listed = xq_at(address, &dir.0, &["list", "--engine", "xq-kings"]);
    assert!(listed.starts_with(&format!("job {job} ")) && listed.contains("— King safety retuned."), "{listed}");
    assert_eq!(xq_at(address, &dir.0, &["list", "--engine", "new"]), "");
    let json = get_json(&format!("http://{address}/api/v1/jobs/{job}")).await;
    assert_eq!(json["source"]["new_commit"], "9f1c2ab", "{json}");
    assert_eq!(json["compare_url"], "https://github.com/owner/xq/compare/master...9f1c2ab", "{json}");
    let submitter = json["submitter"].as_str().unwrap().to_owned();
    let mine = xq_at(address, &dir.0, &["list", "--submitter", &submitter]);
    assert!(mine.starts_with(&format!("job {job} ")), "{mine}");
    assert_eq!(xq_at(address, &dir.0, &["list", "--submitter", "someone-else"]), "");
    // A repository the dashboard could not link safely is refused, naming the field.
    #[rustfmt::skip]
    let said = xq_refused(address, &dir.0, &[
        "games", "--games", "2", "--tc", "depth=2", "--no-bench", "--new", engine, "--base", engine,
        "--repo", "javascript:alert(1)",
    ]);
    assert!(said.contains("source.repository"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preset_fills_what_the_flags_leave_unset() {
    let dir = TempDir::new("presets");
    let (_coordinator, address) = start_coordinator(&dir.0, 0, 10).await;
    let mut admin = crate::common::client(address, &crate::cluster::token(&dir.0)).await;
    let listed = xq_at(address, &dir.0, &["presets"]);
    assert!(listed.starts_with("stc: 10+0.1, SPRT [0, 2] normalized, draw from move 34"), "{listed}");
    assert!(
        listed.contains("\nltc: 60+0.6, SPRT [0.5, 2.5]") && listed.contains("\nnonreg: 10+0.1, SPRT [-1.75, 0.25]")
    );
    let engine = binary("xq-engine");
    let engine = engine.to_str().unwrap();
    let ltc = crate::cluster::job_of(&xq_at(
        address,
        &dir.0,
        &["sprt", "--preset", "ltc", "--no-bench", "--new", engine, "--base", engine],
    ));
    let view = admin.get_job(xq_proto::v1::JobId { job_id: ltc }).await.unwrap().into_inner();
    assert_eq!((view.kind.as_str(), view.time_control.as_str()), ("sprt", "60+0.6"));
    assert_eq!(view.sprt_spec.as_ref().map(|s| (s.elo0, s.elo1)), Some((0.5, 2.5)));
    // The flags given win: a fixed-length test at another time control, adjudicated as
    // the preset says.
    #[rustfmt::skip]
    let own = crate::cluster::job_of(&xq_at(address, &dir.0, &[
        "games", "--preset", "nonreg", "--games", "4", "--tc", "5+0.05", "--no-bench", "--new", engine, "--base", engine,
    ]));
    let view = admin.get_job(xq_proto::v1::JobId { job_id: own }).await.unwrap().into_inner();
    assert_eq!((view.kind.as_str(), view.time_control.as_str(), view.sprt_spec.is_none()), ("games", "5+0.05", true));
    let said = xq_refused(
        address,
        &dir.0,
        &["games", "--preset", "vltc", "--games", "2", "--no-bench", "--new", engine, "--base", engine],
    );
    assert!(said.contains("'vltc' is no preset: use stc, ltc, nonreg"), "{said}");
}
