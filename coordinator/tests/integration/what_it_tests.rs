//! Tests that say what they test (issue #55, part 4), from the command line to the
//! lists: engine names, the repository, each side's branch and commit and an info
//! text given to `xq games` come back from `xq show` (with the compare link of a known
//! forge) and the JSON API, and `xq list` filters by engine name and by submitter.

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
    let job: u64 = submitted.split_whitespace().nth(1).and_then(|w| w.trim_end_matches(':').parse().ok()).unwrap();
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
