//! The dashboard in a real browser: Debian's headless Chromium, driven over WebDriver
//! by chromedriver. A running test appears on the list, its LLR moves on its page as
//! pairs are reported (without a reload), a stopped test shows stopped, and all of it
//! fits a phone's width. Screenshots go to `$CARGO_TARGET_TMPDIR/dashboard/`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client as Browser, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

use crate::common::*;
use crate::dashboard::{report, running_test};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver and a headless Chromium session, ended at drop: every process of
/// the session's Chromium is killed and found gone (chromedriver killed alone left its
/// Chromium running, 70 of them after a full `scripts/test`).
struct Session {
    browser: Browser,
    _driver: tokio::process::Child,
    profile: TempDir,
}

impl Drop for Session {
    fn drop(&mut self) {
        let marker = self.profile.0.display().to_string();
        let start = Instant::now();
        loop {
            let left = processes_naming(&marker);
            if left.is_empty() {
                return;
            }
            for pid in &left {
                if let Some(pid) = rustix::process::Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            // A panic while already panicking would abort the whole test binary.
            if start.elapsed() > Duration::from_secs(10) && !std::thread::panicking() {
                panic!("Chromium processes of {marker} outlived their session: {left:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The processes whose command line names `marker` (a session's profile directory,
/// which its browser, renderers and crash handler are all given), zombies left out.
fn processes_naming(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker) && !status.contains("State:\tZ")
        })
        .collect()
}

async fn session(width: u32, height: u32) -> Session {
    for binary in [CHROMIUM, CHROMEDRIVER] {
        assert!(Path::new(binary).exists(), "{binary} is missing: scripts/setup installs chromium and chromium-driver");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let driver = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let profile = TempDir::new("chromium-profile");
    // Flags as the machine's notes give them: without the background-networking ones
    // Chromium keeps trying hosts this closed network refuses.
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--disable-quic", format!("--user-data-dir={}", profile.0.display()),
                // The crash handler's database in the profile too, so that it is found
                // and ended with the session's other processes.
                format!("--crash-dumps-dir={}", profile.0.join("crashes").display()),
                format!("--window-size={width},{height}"),
            ]
        }
    });
    let mut builder = ClientBuilder::new(HttpConnector::new());
    builder.capabilities(capabilities.as_object().unwrap().clone());
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    let browser = loop {
        match builder.connect(&url).await {
            Ok(browser) => break browser,
            Err(error) if start.elapsed() > Duration::from_secs(30) => panic!("chromedriver: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    Session { browser, _driver: driver, profile }
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

/// The text of the element `css`, once it exists.
async fn text(browser: &Browser, css: &str) -> String {
    loop {
        let element = browser.wait().at_most(Duration::from_secs(20)).for_element(Locator::Css(css)).await.unwrap();
        match element.text().await {
            Ok(text) => return text,
            // A live update re-rendered it between finding and reading: find it again.
            Err(error) if error.is_stale_element_reference() => continue,
            Err(error) => panic!("{css}: {error}"),
        }
    }
}

/// Waits until the text of `css` satisfies `done`; returns it.
async fn wait_for_text(browser: &Browser, css: &str, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let now = text(browser, css).await;
        if done(&now) {
            return now;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{css} stayed '{now}'");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the page is wider than the window (a phone would scroll sideways).
async fn overflows(browser: &Browser) -> bool {
    let answer =
        browser.execute("return document.documentElement.scrollWidth > window.innerWidth + 1;", vec![]).await.unwrap();
    answer.as_bool().unwrap()
}

/// Boards written out by hand (WXF FEN, top rank first), not by the engine.
const START: &str = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR";
const AFTER_H2E2: &str = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR";
const AFTER_H2E2_H9G7: &str = "rnbakab1r/9/1c4nc1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR";

/// "file,row=letter" of every piece of a FEN's board, sorted.
fn board_of(fen: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    for (row, text) in fen.split('/').enumerate() {
        let mut file = 0;
        for c in text.chars() {
            match c.to_digit(10) {
                Some(empty) => file += empty,
                None => {
                    pieces.push(format!("{file},{row}={c}"));
                    file += 1;
                }
            }
        }
    }
    pieces.sort();
    pieces
}

/// The pieces the viewer's SVG board draws, as [`board_of`] lists them.
async fn drawn_board(browser: &Browser) -> Vec<String> {
    let script =
        "return [...document.querySelectorAll('.board .piece')].map(p => p.dataset.square + '=' + p.dataset.piece);";
    let answer = browser.execute(script, vec![]).await.unwrap();
    let mut pieces: Vec<String> = serde_json::from_value(answer).unwrap();
    pieces.sort();
    pieces
}

/// Presses and releases a key, as a user's keyboard would, on whatever has focus.
async fn press(browser: &Browser, key: Key) {
    let keys = KeyActions::new("keyboard".to_owned())
        .then(KeyAction::Down { value: key.into() })
        .then(KeyAction::Up { value: key.into() });
    browser.perform_actions(keys).await.unwrap();
}

#[tokio::test]
async fn a_running_test_lives_on_its_pages_in_a_real_browser() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let (mut admin, mut worker, job, lease) = running_test(&served).await;
    let mut results = vec![[2u8, 1u8]];
    report(&mut worker, &lease, 0, &results).await;

    for (label, width, height) in [("desktop", 1280, 900), ("phone", 390, 844)] {
        let session = session(width, height).await;
        let browser = &session.browser;

        // The list shows the running test.
        browser.goto(&format!("{base}/")).await.unwrap();
        let row = format!("#tests tr[data-job-id=\"{job}\"]");
        let listed = text(browser, &row).await;
        assert!(listed.contains("dashboard test") && listed.contains("running"), "{listed}");
        screenshot(browser, &format!("tests-{label}")).await;
        assert!(!overflows(browser).await, "the tests page is wider than a {width} px window");

        // Its page: the LLR moves as pairs are reported, with no reload (the marker
        // set on the page survives).
        browser.goto(&format!("{base}/tests/{job}")).await.unwrap();
        let before = wait_for_text(browser, "#llr", |t| t.parse::<f64>().is_ok()).await;
        browser.execute("window.xqMarker = 'same page';", vec![]).await.unwrap();
        let first = results.len();
        results.extend([[2, 2], [2, 1]]);
        report(&mut worker, &lease, first, &results).await;
        let after = wait_for_text(browser, "#llr", |t| t != before && t.parse::<f64>().is_ok()).await;
        let expected = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner().sprt.unwrap().llr;
        assert_eq!(after, format!("{expected:.2}"), "the page shows the coordinator's LLR");
        let games = wait_for_text(browser, "#games", |t| t == (results.len() * 2).to_string()).await;
        assert_eq!(games, (results.len() * 2).to_string());
        let marker = browser.execute("return window.xqMarker;", vec![]).await.unwrap();
        assert_eq!(marker, json!("same page"), "the page was reloaded");
        // The charts drew: uPlot makes a canvas in each.
        for chart in ["#llr-chart canvas", "#elo-chart canvas"] {
            browser.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(chart)).await.unwrap();
        }
        screenshot(browser, &format!("test-{label}")).await;
        assert!(!overflows(browser).await, "the test's page is wider than a {width} px window");

        // The board viewer replays the first game of a pair (1. h2e2 h9g7): it opens
        // on the final position, and the keys step back to the start.
        browser.goto(&format!("{base}/tests/{job}/pairs/{}", lease.units[0])).await.unwrap();
        wait_for_text(browser, "#ply", |t| t == "2 / 2").await;
        assert_eq!(drawn_board(browser).await, board_of(AFTER_H2E2_H9G7), "the final position");
        assert!(text(browser, "#fen").await.starts_with(AFTER_H2E2_H9G7));
        assert!(text(browser, "#ply-info").await.starts_with("h9g7"));
        screenshot(browser, &format!("viewer-{label}")).await;
        assert!(!overflows(browser).await, "the board viewer is wider than a {width} px window");
        press(browser, Key::Left).await;
        wait_for_text(browser, "#ply", |t| t == "1 / 2").await;
        assert_eq!(drawn_board(browser).await, board_of(AFTER_H2E2), "one ply back");
        press(browser, Key::Home).await;
        wait_for_text(browser, "#ply", |t| t == "0 / 2").await;
        assert_eq!(drawn_board(browser).await, board_of(START), "the start position");
        browser.find(Locator::Css("#next")).await.unwrap().click().await.unwrap();
        wait_for_text(browser, "#ply", |t| t == "1 / 2").await;
        // Characters by default (WXF's: 俥 for Red's chariot, 將 for Black's king),
        // Latin letters when asked.
        assert_eq!(text(browser, ".board .piece[data-piece='R'] text").await, "俥");
        assert_eq!(text(browser, ".board .piece[data-piece='k'] text").await, "將");
        browser.find(Locator::Css("#chinese")).await.unwrap().click().await.unwrap();
        wait_for_text(browser, ".board .piece[data-piece='R'] text", |t| t == "R").await;

        // Workers and the SPRT calculator render; the calculator, given the test's
        // pentanomial and bounds, finds the test's LLR.
        browser.goto(&format!("{base}/workers")).await.unwrap();
        text(browser, "#workers tr[data-worker-id]").await;
        let script = "return Object.fromEntries([...document.querySelector('#workers tr[data-worker-id]').cells]\
                      .map(c => [c.dataset.label, c.textContent]));";
        let cells = browser.execute(script, vec![]).await.unwrap();
        let w1 = admin.list_workers(v1::ListWorkersRequest {}).await.unwrap().into_inner().workers.remove(0);
        let playing = if w1.active_leases > 0 { format!("#{job}") } else { "idle".to_owned() };
        assert_eq!((&cells["Name"], &cells["Jobs"]), (&json!("w1"), &json!(playing)), "{cells}");
        // A worker token's worker is no user's (a machine enrolled with a key shows its user).
        assert_eq!(cells["User"], json!(if w1.user.is_empty() { "–" } else { w1.user.as_str() }), "{cells}");
        assert_eq!(cells["Units done"], json!(w1.units_done.to_string()), "{cells}");
        screenshot(browser, &format!("workers-{label}")).await;
        // The contributors page shows the machine's credit as the API sums it.
        browser.goto(&format!("{base}/contributors")).await.unwrap();
        text(browser, "#machines tr[data-worker-id]").await;
        let script = "return Object.fromEntries([...document.querySelector('#machines tr[data-worker-id]').cells]\
                      .map(c => [c.dataset.label, c.textContent]));";
        let cells = browser.execute(script, vec![]).await.unwrap();
        let listed = admin.list_contributors(v1::ListContributorsRequest {}).await.unwrap().into_inner();
        let all = listed.machines[0].credit.unwrap().all_time.unwrap();
        assert_eq!((&cells["Machine"], &cells["Games"]), (&json!("w1"), &json!(all.games.to_string())), "{cells}");
        assert_eq!(cells["Core-hours"], json!(format!("{:.2}", all.cpu_hours)), "{cells}");
        assert!(all.games >= 2, "{listed:?}");
        assert!(!overflows(browser).await, "the contributors page is wider than a {width} px window");
        screenshot(browser, &format!("contributors-{label}")).await;
        let shown = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
        let penta: Vec<String> = shown.totals.unwrap().pentanomial.iter().map(u64::to_string).collect();
        browser.goto(&format!("{base}/sprt?elo0=0&elo1=10&penta={}", penta.join(","))).await.unwrap();
        let llr = wait_for_text(browser, "#sprt-llr", |t| t.parse::<f64>().is_ok()).await;
        assert_eq!(llr, format!("{:.2}", shown.sprt.unwrap().llr));
        screenshot(browser, &format!("sprt-{label}")).await;
        session.browser.clone().close().await.unwrap();
    }

    // A stopped test shows stopped on its open page.
    let session = session(1280, 900).await;
    let browser = &session.browser;
    browser.goto(&format!("{base}/tests/{job}")).await.unwrap();
    wait_for_text(browser, "#state", |t| t.contains("running")).await;
    assert!(browser.find(Locator::Css("#job-ended")).await.is_err(), "a running test has not ended");
    let stopped = admin.stop_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    wait_for_text(browser, "#state", |t| t.contains("stopped")).await;
    // Its end, and how long it lasted: under 90 s in seconds, else in minutes.
    let lasted = ((stopped.ended_ms - stopped.created_ms) as f64 / 1000.0).round() as i64;
    let lasted = if lasted < 90 { format!("{lasted} s") } else { format!("{} min", (lasted as f64 / 60.0).round()) };
    let ended = text(browser, "#job-ended").await;
    assert!(ended.ends_with(&format!("({lasted} after its creation)")), "{ended}");
    screenshot(browser, "test-stopped").await;
    session.browser.clone().close().await.unwrap();
}

/// An SPSA run's page: its parameters with theta as the coordinator has it, the line
/// to paste, theta's chart, and theta moving live as pairs are reported; on a phone
/// too.
#[tokio::test]
async fn an_spsa_run_shows_its_parameters_and_theta_live() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let mut admin = client(served.address, &served.client_token).await;
    let mut test = test_request(&mut admin, 50, None).await;
    test.base_engine = None;
    let spsa = v1::SpsaSpec {
        params: "Futility Base, 100, 0, 300, 15, 0.01\nLMR Divisor, 230, 100, 500, 20, 0.01".to_owned(),
        ..Default::default()
    };
    let job =
        admin.create_spsa(v1::CreateSpsaRequest { test: Some(test), spsa: Some(spsa) }).await.unwrap().into_inner();
    let mut worker = registered_worker(&served, "w1", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let mut played: Vec<[u8; 2]> = Vec::new();
    let mut report = async |played: &mut Vec<[u8; 2]>, points: [u8; 2]| {
        played.push(points);
        let unit = lease.units[played.len() - 1];
        let request = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![named_pair(unit, points, ["plus", "minus"])],
            cumulative: Some(totals(played)),
            ..Default::default()
        };
        worker.report_pairs(request).await.unwrap();
    };
    report(&mut played, [2, 2]).await;
    let value = |job: &v1::Job| format!("{:.2}", job.spsa.as_ref().unwrap().parameters[0].value);

    for (label, width, height) in [("desktop", 1280, 900), ("phone", 390, 844)] {
        let session = session(width, height).await;
        let browser = &session.browser;
        browser.goto(&format!("{base}/tests/{}", job.job_id)).await.unwrap();
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        let row = "#spsa-parameters tr[data-parameter='Futility Base']";
        let shown = wait_for_text(browser, &format!("{row} .value"), |t| t == value(&state)).await;
        assert_ne!(shown, "100.00", "theta moved after won pairs");
        let rounded = state.spsa.as_ref().unwrap().parameters[0].value.round();
        assert!(text(browser, row).await.contains(&format!("setoption name Futility Base value {rounded}")));
        assert!(text(browser, "#spsa-parameters tr[data-parameter='LMR Divisor']").await.contains("100 … 500"));
        browser.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css("#spsa-chart canvas")).await.unwrap();
        // A pair plus wins by a game moves theta on, on the page without a reload.
        report(&mut played, [2, 1]).await;
        let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
        wait_for_text(browser, &format!("{row} .value"), |t| t == value(&state)).await;
        wait_for_text(browser, "#spsa-iterations", |t| t.starts_with(&format!("Theta after {} pairs", played.len())))
            .await;
        screenshot(browser, &format!("spsa-{label}")).await;
        assert!(!overflows(browser).await, "the SPSA page is wider than a {width} px window");
    }
}

/// A tournament's page: its standings as the coordinator places them, updated live as
/// its tests count pairs, with a link to each pairing's test; on a phone too.
#[tokio::test]
async fn a_tournament_page_shows_its_standings_live() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let mut admin = client(served.address, &served.client_token).await;
    let template = test_request(&mut admin, 1, None).await;
    let engines: Vec<v1::EngineSpec> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|name| v1::EngineSpec { name: (*name).to_owned(), ..template.new_engine.clone().unwrap() })
        .collect();
    let settings = v1::CreateTestRequest { new_engine: None, base_engine: None, pairs: 0, ..template };
    let request = v1::CreateTournamentRequest { engines, settings: Some(settings), ..Default::default() };
    let tournament = admin.create_tournament(request).await.unwrap().into_inner();
    let mut worker = registered_worker(&served, "w1", &[]).await;
    let mut play = async |points: [u8; 2]| {
        let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
        let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease") };
        let names = [spec.new_engine.as_ref().unwrap().name.clone(), spec.base_engine.as_ref().unwrap().name.clone()];
        let request = v1::ReportPairsRequest {
            lease_id: lease.lease_id,
            pairs: vec![named_pair(lease.units[0], points, [&names[0], &names[1]])],
            cumulative: Some(totals(&[points])),
            ..Default::default()
        };
        worker.report_pairs(request).await.unwrap();
        names
    };
    let first = play([2, 2]).await;
    let id = tournament.tournament_id;
    for (label, width, height) in [("desktop", 1280, 900), ("phone", 390, 844)] {
        let session = session(width, height).await;
        let browser = &session.browser;
        browser.goto(&format!("{base}/tournaments/{id}")).await.unwrap();
        let leader = wait_for_text(browser, "#standings tbody tr:first-child", |t| t.contains(&first[0])).await;
        assert!(leader.contains('4'), "two wins at 2-1-0 points: {leader}");
        assert!(text(browser, "#tournament-summary").await.contains("double-round-robin"));
        let links = browser.find_all(Locator::Css("#pairings a")).await.unwrap();
        assert_eq!(links.len(), 3);
        screenshot(browser, &format!("tournament-{label}")).await;
        assert!(!overflows(browser).await, "the tournament page is wider than a {width} px window");
    }
    // Live: another pairing's pair moves the standings without a reload.
    let session = session(1280, 900).await;
    let browser = &session.browser;
    browser.goto(&format!("{base}/tournaments/{id}")).await.unwrap();
    wait_for_text(browser, "#standings tbody tr:first-child", |t| t.contains(&first[0])).await;
    browser.execute("window.xqMarker = 'same page';", vec![]).await.unwrap();
    let second = play([1, 1]).await;
    let row = format!("#standings tr[data-engine='{}']", second[0]);
    // Its two draws show in its W-D-L.
    wait_for_text(browser, &row, |t| t.contains("-2-")).await;
    let marker = browser.execute("return window.xqMarker;", vec![]).await.unwrap();
    assert_eq!(marker, json!("same page"), "the page was reloaded");
    // The page's link to the event's PGN gives the four games played so far.
    let fetched = "return fetch(document.querySelector('#event-pgn').href).then((reply) => reply.text());";
    let pgn = browser.execute(fetched, vec![]).await.unwrap();
    let games = xq_engine::xiangqi::pgn::parse_pgn(pgn.as_str().unwrap()).unwrap();
    assert_eq!(games.len(), 4, "{pgn}");
    assert!(games.iter().all(|g| g.tag("Round").is_some_and(|r| r.contains('.'))), "{pgn}");
    // The list of tournaments, reached from the navigation, links to it.
    browser.goto(&base).await.unwrap();
    browser.find(Locator::Css("nav a[href='/tournaments']")).await.unwrap().click().await.unwrap();
    let row = wait_for_text(browser, &format!("#tournaments tr[data-tournament-id='{id}']"), |t| {
        t.contains("double-round-robin") && t.contains("running")
    })
    .await;
    assert!(row.contains(&second[0]) || row.contains(&first[0]), "the leader is shown: {row}");
    browser
        .find(Locator::Css(&format!("#tournaments a[href='/tournaments/{id}']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(browser, "#tournament-summary", |t| t.contains("double-round-robin")).await;
}

/// A verification job's page: its counts as GetVerification gives them, by kind and by
/// article, and links to the report and the parting games that download them.
#[tokio::test]
async fn a_verification_job_page_shows_where_the_rule_sets_part() {
    use crate::verification::{GAMES, verify_all};
    let served = serve(Backend::Sqlite, SchedulerConfig { reference_nps: 0, ..SchedulerConfig::default() }).await;
    let base = format!("http://{}", served.address);
    let mut admin = client(served.address, &served.client_token).await;
    let pgn = upload(&mut admin, "chases.pgn", "pgn", GAMES.as_bytes()).await.unwrap();
    let request = v1::CreateVerificationRequest { pgn: Some(pgn), games_per_unit: 2, ..Default::default() };
    let job = admin.create_verification(request).await.unwrap().into_inner();
    let mut worker = registered_worker(&served, "w", &[]).await;
    verify_all(&mut worker, None, GAMES.as_bytes()).await;
    let summary = admin.get_verification(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    for (label, width, height) in [("desktop", 1280, 900), ("phone", 390, 844)] {
        let session = session(width, height).await;
        let browser = &session.browser;
        browser.goto(&format!("{base}/tests/{}", job.job_id)).await.unwrap();
        let counts = wait_for_text(browser, "#verification-counts", |t| t.contains("4 of 4 games verified")).await;
        assert!(counts.contains("2 where the rule sets part, 1 that could not be replayed"), "{counts}");
        let kinds = text(browser, "#verification-kinds").await;
        for (kind, count) in &summary.by_kind {
            assert!(kinds.contains(kind.as_str()) && kinds.contains(&count.to_string()), "{kind}: {kinds}");
        }
        assert!(text(browser, "#verification-articles").await.contains("WXF 20.3"));
        screenshot(browser, &format!("verification-{label}")).await;
        assert!(!overflows(browser).await, "the verification page is wider than a {width} px window");
        let fetched =
            "return fetch(document.querySelector(\"a[href$='parting.pgn']\").href).then((reply) => reply.text());";
        let pgn = browser.execute(fetched, vec![]).await.unwrap();
        let parting = xq_engine::xiangqi::pgn::parse_pgn(pgn.as_str().unwrap()).unwrap();
        assert_eq!(parting.len(), 2, "{pgn}");
    }
}

/// A test whose games were won by perpetual checks (WXF 20.1) says so on its page, with
/// the pairs as the board decided them and their Elo, as `xq show` gives them.
#[tokio::test]
async fn a_test_page_counts_the_wins_by_a_repetition_ruling_apart() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let mut admin = client(served.address, &served.client_token).await;
    let job = ruled_test(&served, &mut admin).await;
    let view = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    let elo = view.over_the_board.as_ref().unwrap().elo.unwrap();
    let session = session(1280, 900).await;
    let browser = &session.browser;
    browser.goto(&format!("{base}/tests/{job}")).await.unwrap();
    let shown = wait_for_text(browser, "#over-the-board", |t| !t.is_empty()).await;
    // The page's signs: a plus above zero, a true minus sign below.
    let signed = |v: f64| if v > 0.0 { format!("+{v:.1}") } else { format!("{v:.1}").replace('-', "\u{2212}") };
    let expected = format!(
        "Won by a repetition ruling: new 2, base 2. Over the board (those as draws): pentanomial [0, 0, 2, 1, 0], \
         Elo {} [{}, {}].",
        signed(elo.elo),
        signed(elo.low),
        signed(elo.high)
    );
    assert_eq!(shown, expected);
    assert!(text(browser, "#reasons").await.contains("perpetual check"));
    screenshot(browser, "test-ruled").await;
    session.browser.clone().close().await.unwrap();
}

/// A lineage's page while its loop runs (#59): the generation in progress, whose net
/// does not exist yet, shows as the running job the loop made for the lineage (not
/// another lineage's, nor a job that only names it in its description), links back to
/// the lineage from its own page, and leaves the lineage's page by itself once it ends.
#[tokio::test]
async fn a_lineage_page_shows_its_generation_in_progress_live() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let mut admin = client(served.address, &served.client_token).await;
    let mut self_play = async |lineage: &str, description: &str| {
        let spec = v1::SelfPlaySpec { nodes: 100, games_per_unit: 1, ..Default::default() };
        let request = v1::CreateSelfPlayRequest {
            spec: Some(spec),
            units: 4,
            description: description.to_owned(),
            lineage: lineage.to_owned(),
            ..Default::default()
        };
        admin.create_self_play(request).await.unwrap().into_inner().job_id
    };
    let ours = self_play("main", "generation 2 self-play").await;
    let theirs = self_play("mainline", "generation 2 self-play").await;
    let namesake = self_play("", "self-play like lineage main's").await;
    let session = session(1280, 900).await;
    let browser = &session.browser;
    browser.goto(&format!("{base}/nets?lineage=main")).await.unwrap();
    let running = wait_for_text(browser, "#lineage-running", |t| t.contains("In progress")).await;
    assert!(running.contains("generation 2 self-play"), "{running}");
    let rows = browser.find_all(Locator::Css("#lineage-jobs tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 1, "{running}");
    assert_eq!(rows[0].attr("data-job-id").await.unwrap(), Some(ours.to_string()), "not job {theirs} or {namesake}");
    screenshot(browser, "lineage-running").await;
    admin.stop_job(v1::JobId { job_id: ours }).await.unwrap();
    browser.execute("window.xqMarker = 'same page';", vec![]).await.unwrap();
    let start = Instant::now();
    while browser.find(Locator::Css("#lineage-running[hidden]")).await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(30), "the ended job stayed in progress");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let marker = browser.execute("return window.xqMarker;", vec![]).await.unwrap();
    assert_eq!(marker, json!("same page"), "the page was reloaded");
    browser.goto(&format!("{base}/tests/{theirs}")).await.unwrap();
    wait_for_text(browser, "#job-lineage", |t| t == "mainline").await;
    browser.find(Locator::Css("#job-lineage a")).await.unwrap().click().await.unwrap();
    wait_for_text(browser, "h1", |t| t == "Nets").await;
    let url = browser.current_url().await.unwrap();
    assert!(url.as_str().ends_with("/nets?lineage=mainline"), "{url}");
    session.browser.clone().close().await.unwrap();
}

/// A test that says what it tests (issue #55, part 4) and a failure a worker reported
/// on it (part 3), on its page: the engines' names, the author's text as text (markup
/// in it shown, not run), the forge's compare link, and the report with its worker;
/// the list filters by engine name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_page_says_what_it_tests_and_what_its_workers_could_not_do() {
    let served = serve(Backend::Sqlite, SchedulerConfig::default()).await;
    let base = format!("http://{}", served.address);
    let mut admin = client(served.address, &served.client_token).await;
    let sprt = v1::SprtSpec { elo0: 0.0, elo1: 5.0, alpha: 0.05, beta: 0.05, ..Default::default() };
    let mut request = test_request(&mut admin, 64, Some(sprt)).await;
    request.new_engine.as_mut().unwrap().name = "mine".to_owned();
    request.description = "King safety, short time control".to_owned();
    request.base_engine.as_mut().unwrap().name = "master".to_owned();
    let info = "King safety retuned.\n<b>not bold</b>";
    request.source = Some(v1::TestSource {
        repository: "https://github.com/owner/engine".to_owned(),
        new_branch: "kings".to_owned(),
        new_commit: "9f1c2ab".to_owned(),
        base_branch: "master".to_owned(),
        info: info.to_owned(),
        ..Default::default()
    });
    let job = admin.create_test(request).await.unwrap().into_inner().job_id;
    let mut worker = registered_worker(&served, "w1", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    // Some results first, for the LLR and its chart: the page the README shows.
    let results = [[2, 1], [1, 1], [2, 2], [1, 0], [2, 1], [1, 1]];
    let results = &results[..lease.units.len().min(results.len())];
    let pairs = results.iter().zip(&lease.units).map(|(p, &unit)| named_pair(unit, *p, ["mine", "master"])).collect();
    let cumulative = Some(totals(results));
    worker
        .report_pairs(v1::ReportPairsRequest { lease_id: lease.lease_id, pairs, cumulative, ..Default::default() })
        .await
        .unwrap();
    let detail = "bench signature 1 on this worker, the test expects 2\n<script>document.title='owned'</script>";
    let report = v1::FailureReport {
        lease_id: lease.lease_id,
        kind: "bench".to_owned(),
        engine: "mine".to_owned(),
        detail: detail.to_owned(),
    };
    assert!(!worker.report_failure(report).await.unwrap().into_inner().job_stopped, "one worker stops nothing");

    let session = session(1280, 900).await;
    let browser = &session.browser;
    browser.goto(&format!("{base}/tests/{job}")).await.unwrap();
    assert_eq!(wait_for_text(browser, "#info", |t| !t.is_empty()).await, info);
    let source = text(browser, "#source").await;
    assert!(source.contains("mine\nkings at 9f1c2ab") && source.contains("master\nmaster"), "{source}");
    let compare = browser.find(Locator::Css("#compare")).await.unwrap().attr("href").await.unwrap();
    assert_eq!(compare.as_deref(), Some("https://github.com/owner/engine/compare/master...9f1c2ab"));
    let failures = wait_for_text(browser, "#failures-table tbody", |t| !t.is_empty()).await;
    for shown in ["bench", "mine", "w1 (#", "the test expects 2", "<script>document.title='owned'</script>"] {
        assert!(failures.contains(shown), "{shown} in {failures}");
    }
    assert_ne!(browser.title().await.unwrap(), "owned", "a report's text is shown, never run");
    wait_for_text(browser, "#llr", |t| t.parse::<f64>().is_ok()).await;
    for chart in ["#llr-chart canvas", "#elo-chart canvas"] {
        browser.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(chart)).await.unwrap();
    }
    assert_eq!(text(browser, "#book").await, "start position");
    // docs/dashboard.png, the README's picture, is this one (scripts/readme-screenshot):
    // the whole page, charts and failures below the facts.
    let height = browser.execute("return document.documentElement.scrollHeight;", vec![]).await.unwrap();
    browser.set_window_size(1280, height.as_u64().unwrap().min(4000) as u32 + 100).await.unwrap();
    screenshot(browser, "readme-test-page").await;
    browser.set_window_size(1280, 900).await.unwrap();
    // The list filters by engine name.
    for (engine, listed) in [("mine", true), ("someone-else", false)] {
        browser.goto(&format!("{base}/?engine={engine}")).await.unwrap();
        let count = wait_for_text(browser, ".count", |t| !t.is_empty()).await;
        assert_eq!(count, if listed { "1 job" } else { "0 jobs" }, "{engine}");
    }
    session.browser.clone().close().await.unwrap();
}

/// Types `text` into the input `css`.
async fn fill(browser: &Browser, css: &str, text: &str) {
    let input = browser.wait().at_most(Duration::from_secs(20)).for_element(Locator::Css(css)).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(text).await.unwrap();
}

async fn click(browser: &Browser, css: &str) {
    browser
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// A volunteer in a real browser (#56): signs up and logs in on the dashboard's pages
/// (the session's cookie unreadable by the page's scripts), makes a worker key on their
/// page, sees the machine it enrolled and retires it, and logs out.
#[tokio::test]
async fn a_volunteer_signs_up_logs_in_and_manages_their_machines_in_a_real_browser() {
    let config =
        SchedulerConfig { signup: xq_coordinator::access::accounts::SignupMode::Open, ..SchedulerConfig::default() };
    let served = serve(Backend::Sqlite, config).await;
    let base = format!("http://{}", served.address);
    let session = session(1280, 900).await;
    let browser = &session.browser;
    let password = "carol's long password";

    browser.goto(&format!("{base}/signup")).await.unwrap();
    fill(browser, "#signup-name", "carol").await;
    fill(browser, "#signup-password", password).await;
    click(browser, "#signup-form button[type=submit]").await;
    wait_for_text(browser, "#signup-status", |t| t.contains("Signed up as carol")).await;

    click(browser, "#log-in").await;
    fill(browser, "#login-name", "carol").await;
    fill(browser, "#login-password", password).await;
    click(browser, "#login-form button[type=submit]").await;
    wait_for_text(browser, "#session-user", |t| t == "carol").await;
    wait_for_text(browser, "h1", |t| t == "carol").await;
    let cookies = browser.execute("return document.cookie;", vec![]).await.unwrap();
    assert!(!cookies.as_str().unwrap().contains("xq_session"), "HttpOnly: {cookies}");
    screenshot(browser, "user-page").await;

    // A worker key, shown once; a machine it enrolls is listed and retired.
    click(browser, "#make-worker-key").await;
    let key = wait_for_text(browser, "#worker-key-token", |t| !t.is_empty()).await;
    let mut request =
        tonic::Request::new(v1::EnrollMachineRequest { machine_id: "desk-1".to_owned(), name: "desk-1".to_owned() });
    let bearer = tonic::metadata::MetadataValue::try_from(format!("Bearer {}", key.trim())).unwrap();
    request.metadata_mut().insert("authorization", bearer);
    let mut accounts = v1::accounts_client::AccountsClient::new(channel(served.address).await);
    let worker = accounts.enroll_machine(request).await.unwrap().into_inner().worker_id;
    browser.goto(&format!("{base}/users/carol")).await.unwrap();
    let row = format!("#user-machines tr[data-worker-id=\"{worker}\"]");
    assert!(text(browser, &row).await.contains("active"));
    click(browser, &format!("{row} button.retire")).await;
    wait_for_text(browser, &row, |t| t.contains("disabled")).await;
    assert!(!overflows(browser).await, "the user page is wider than the window");

    click(browser, "#log-out").await;
    wait_for_text(browser, "#session", |t| t.contains("Log in")).await;
    session.browser.clone().close().await.unwrap();
}
