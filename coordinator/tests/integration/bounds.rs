//! Requests past a bound are refused naming it, and nothing of them is kept: leases
//! that would not fit a reply, registrations past their limits.

use crate::common::{BACKENDS, client, pair, registered_worker, serve, test_request, totals};
use crate::security::{config, create, job_ids, submitter, workers};
use tonic::Code;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;

/// Attack: a submitter's SPSA run of 20,000 parameters was taken, and every lease of it
/// (each carrying every parameter twice) was over the 8 MiB reply limit, so each
/// worker that leased it exited. Now the parameters are bounded, and any job whose
/// leases could pass the limit is refused when it is created.
#[tokio::test]
async fn an_spsa_run_or_test_whose_leases_would_not_fit_a_reply_is_refused_and_nothing_stored() {
    use xq_coordinator::jobs::spsa::{MAX_NAME_CHARS, MAX_PARAMETERS};

    // Leases of up to 3,000,000 units, so that a test of as many pairs makes one too big.
    let config = SchedulerConfig { max_units_per_lease: 3_000_000, ..config() };
    let served = serve(BACKENDS[0], config).await;
    let (mut mallory, _) = submitter(&served, "mallory").await;
    let mut test = test_request(&mut mallory, 10, None).await;
    test.base_engine = None;
    let spsa = |params: String| v1::CreateSpsaRequest {
        test: Some(test.clone()),
        spsa: Some(v1::SpsaSpec { params, ..Default::default() }),
    };
    let jobs = job_ids(&mut mallory).await;

    let many: String = (0..20_000).map(|i| format!("P{i}, 100, 0, 200, 10, 0.002\n")).collect();
    let long = format!("{}, 100, 0, 200, 10, 0.002", "P".repeat(MAX_NAME_CHARS + 1));
    let cases = [
        (many, format!("20000 parameters: at most {MAX_PARAMETERS}")),
        (long, format!("a name is at most {MAX_NAME_CHARS} characters")),
        ("A\tB, 100, 0, 200, 10, 0.002".to_owned(), "letters, digits and '_'".to_owned()),
        ("Margin value 3, 100, 0, 200, 10, 0.002".to_owned(), "neither 'name' nor 'value'".to_owned()),
    ];
    for (params, bound) in cases {
        let status = mallory.create_spsa(spsa(params)).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().starts_with("spsa.params: "), "{}", status.message());
        assert!(status.message().contains(&bound), "{bound}: {}", status.message());
    }
    // A test whose leases could hold 3,000,000 unit numbers of 3 bytes each.
    let mut huge = test_request(&mut mallory, 3_000_000, None).await;
    let status = mallory.create_test(huge.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let limit = format!("over the {}-byte limit of a reply", xq_proto::MAX_MESSAGE_BYTES);
    assert!(status.message().contains(&limit), "{}", status.message());
    assert_eq!(job_ids(&mut mallory).await, jobs, "nothing stored");

    // A run of sensible size, and a test of fewer pairs, are taken.
    let params = (0..MAX_PARAMETERS).map(|i| format!("Search Param_{i}, 100, 0, 200, 10, 0.002\n")).collect();
    let job = mallory.create_spsa(spsa(params)).await.unwrap().into_inner();
    assert_eq!(job.spsa.as_ref().unwrap().parameters.len(), MAX_PARAMETERS);
    huge.pairs = 1_000;
    mallory.create_test(huge).await.unwrap();
    // The run's leases reach a worker, every parameter in them.
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let Some(v1::lease::Work::MatchSpec(spec)) = &lease.work else { panic!("a match lease: {lease:?}") };
    assert_eq!((lease.job_id, spec.new_engine.as_ref().unwrap().options.len()), (job.job_id, MAX_PARAMETERS));
}

/// Attack: a worker's registration was bounded in its strings' lengths and its number
/// of CPU flags, but not in each flag's length nor in its references, so one
/// registration could keep megabytes with the worker's row, listed to every client and
/// looked through at each lease. Now every field is bounded, a refusal names the field
/// and its bound, nothing of a refused registration is kept, and the server goes on
/// serving the other workers.
#[tokio::test]
async fn a_registration_past_a_bound_is_refused_naming_it_and_nothing_of_it_is_kept() {
    use xq_coordinator::jobs::checks::MAX_CPU_FLAG_CHARS;
    use xq_coordinator::scheduler::registration::{
        MAX_ARBITER_BUILD_CHARS, MAX_BENCH_NPS, MAX_CORES, MAX_CPU_FLAGS, MAX_NAME_CHARS, MAX_REFERENCE_CHARS,
        MAX_REFERENCES, MAX_VERSION_CHARS,
    };

    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let mut mallory = registered_worker(&served, "mallory", &["avx2"]).await;
    let [listed] = <[v1::WorkerInfo; 1]>::try_from(workers(&mut admin).await).unwrap();
    let (id, registered) = (listed.worker_id, listed.capabilities.unwrap());
    let at_bounds = v1::Capabilities {
        name: "m".repeat(MAX_NAME_CHARS),
        cores: MAX_CORES,
        cpu_flags: (0..MAX_CPU_FLAGS).map(|i| format!("{i:0>MAX_CPU_FLAG_CHARS$}")).collect(),
        version: "v".repeat(MAX_VERSION_CHARS),
        bench_nps: MAX_BENCH_NPS,
        references: (0..MAX_REFERENCES).map(|i| format!("{i:0>MAX_REFERENCE_CHARS$}")).collect(),
        arbiter_build: "b".repeat(MAX_ARBITER_BUILD_CHARS),
    };
    let past = |change: &dyn Fn(&mut v1::Capabilities)| {
        let mut capabilities = at_bounds.clone();
        change(&mut capabilities);
        Some(capabilities)
    };
    let text = |field: &str, most: usize| format!("capabilities.{field}: at most {most} bytes of UTF-8");
    let cases = [
        (None, "capabilities: missing".to_owned()),
        (past(&|c| c.name.push('y')), text("name", MAX_NAME_CHARS)),
        (past(&|c| c.name = "mal\nlory".to_owned()), text("name", MAX_NAME_CHARS) + " and no control characters"),
        (past(&|c| c.cores = 0), format!("capabilities.cores: 0: between 1 and {MAX_CORES}")),
        (
            past(&|c| c.cores = MAX_CORES + 1),
            format!("capabilities.cores: {}: between 1 and {MAX_CORES}", MAX_CORES + 1),
        ),
        (
            past(&|c| c.cpu_flags.push("avx2".to_owned())),
            format!("capabilities.cpu_flags: {} flags: at most {MAX_CPU_FLAGS}", MAX_CPU_FLAGS + 1),
        ),
        // One flag of 4 MiB, within the message limit, as the coordinator used to keep.
        (past(&|c| c.cpu_flags[0] = "f".repeat(4 << 20)), text("cpu_flags", MAX_CPU_FLAG_CHARS)),
        (past(&|c| c.version.push('v')), text("version", MAX_VERSION_CHARS)),
        (
            past(&|c| c.bench_nps = MAX_BENCH_NPS + 1),
            format!("capabilities.bench_nps: {}: at most {MAX_BENCH_NPS}", MAX_BENCH_NPS + 1),
        ),
        // A hundred thousand references, each of them short.
        (
            past(&|c| c.references = vec!["pyffish".to_owned(); 100_000]),
            format!("capabilities.references: 100000 references: at most {MAX_REFERENCES}"),
        ),
        (past(&|c| c.references[0].push('r')), text("references", MAX_REFERENCE_CHARS)),
        (past(&|c| c.arbiter_build.push('b')), text("arbiter_build", MAX_ARBITER_BUILD_CHARS)),
    ];
    for (capabilities, bound) in cases {
        let status = mallory.register(v1::RegisterRequest { capabilities }).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{bound}: {status:?}");
        assert!(status.message().starts_with(&bound), "'{}' does not name '{bound}'", status.message());
    }
    let kept = |workers: Vec<v1::WorkerInfo>| workers.into_iter().find(|w| w.worker_id == id).unwrap().capabilities;
    assert_eq!(kept(workers(&mut admin).await), Some(registered), "nothing of a refused registration is kept");
    // At every bound, a registration is taken and kept as sent.
    mallory.register(v1::RegisterRequest { capabilities: Some(at_bounds.clone()) }).await.unwrap();
    assert_eq!(kept(workers(&mut admin).await), Some(at_bounds));
    // The other workers are served: one registers, leases a test's unit and reports it.
    create(&mut admin, 4).await;
    let mut honest = registered_worker(&served, "honest", &[]).await;
    let lease = honest.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let report = v1::ReportPairsRequest {
        lease_id: lease.lease_id,
        pairs: vec![pair(lease.units[0], [1, 1])],
        cumulative: Some(totals(&[[1, 1]])),
        ..Default::default()
    };
    honest.report_pairs(report).await.unwrap();
}

/// The review's book bomb (2026-11-28, F3): a 15 MB book of 600,000 FEN lines took a
/// coordinator from 61 to 648 MB at its upload and kept it there while a test played
/// it, and a 64 MB one reached 2.5 GB. Books are kept compact now: a real coordinator
/// process takes the book and a test over it for a few times the book's size, and a
/// book past the bound of bytes is refused before it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_book_costs_a_few_times_its_size_and_one_past_the_bound_is_refused() {
    use crate::common::{TempDir, process_memory, upload};
    let dir = TempDir::new("book-bomb");
    let (coordinator, address) = crate::cluster::start_coordinator(&dir.0, 0, 600).await;
    let pid = coordinator.id().unwrap();
    let mut admin = client(address, &crate::cluster::token(&dir.0)).await;
    let book = "3k5/9/9/9/9/9/9/9/9/4K4 w\n".repeat(600_000);
    let before = process_memory(pid, "VmHWM");
    let uploaded = upload(&mut admin, "bomb.epd", "book", book.as_bytes()).await.unwrap();
    let mut request = test_request(&mut admin, 2, None).await;
    request.book = Some(uploaded);
    admin.create_test(request).await.unwrap();
    let after = process_memory(pid, "VmHWM");
    let grown = after.saturating_sub(before);
    eprintln!(
        "a {} MB book uploaded and a test over it: peak memory {} MB before, {} MB after",
        book.len() >> 20,
        before >> 20,
        after >> 20
    );
    // The file read, its parse at the upload and the test's (the allocator keeps some
    // of what the first freed): under ten times the book, where it was 40.
    assert!(grown < 10 * book.len() as u64, "{} MB more for a {} MB book", grown >> 20, book.len() >> 20);
    // Past the bound of bytes: refused by its size, naming the bound.
    let over = " ".repeat(xq_engine::book::MAX_BOOK_BYTES + 1);
    let refused = upload(&mut admin, "huge.epd", "book", over.as_bytes()).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("more than a book's 67108864"), "{}", refused.message());
}

/// F13 of the review of 2026-11-28: an upload's name held terminal escapes and line
/// breaks as given, while every other name refuses control characters.
#[tokio::test]
async fn an_upload_name_with_control_characters_is_refused() {
    let served = serve(BACKENDS[0], SchedulerConfig::default()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let name = "games\u{1b}]0;PWNED\u{7}\u{1b}[2J\r\nfake line.pgn";
    let refused = crate::common::upload(&mut admin, name, "pgn", b"1. h2e2 *\n").await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("no control characters"), "{}", refused.message());
    crate::common::upload(&mut admin, "games with spaces.pgn", "pgn", b"h2e2 h9g7 *\n").await.unwrap();
}
