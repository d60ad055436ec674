//! Self-play chunks are not trusted: checked against their unit, replayed, and only
//! then stored and streamed.

use crate::common::{BACKENDS, TempDir, client, process_memory, registered_worker, registered_worker_at, serve};
use crate::security::{config, unit_chunk, unit_records};
use tonic::Code;
use xq_engine::color::Color;
use xq_engine::xiangqi::data::{Record, write_chunk};
use xq_engine::xiangqi::rules::Outcome;
use xq_proto::v1;

#[tokio::test]
async fn self_play_chunks_are_checked_then_stored_and_streamed() {
    let served = serve(BACKENDS[1], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, ..Default::default() };
    let job = admin
        .create_self_play(v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 2, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    assert!(matches!(lease.work, Some(v1::lease::Work::SelfPlay(_))));
    let status = worker
        .upload_chunk(v1::UploadChunkRequest {
            lease_id: lease.lease_id,
            unit: 0,
            chunk: b"garbage".to_vec(),
            games: 2,
        })
        .await
        .unwrap_err();
    assert!(status.message().starts_with("chunk:"), "{}", status.message());
    let uploaded = [unit_chunk(&spec, 0, 20), unit_chunk(&spec, 1, 20)];
    for unit in [0, 1] {
        let chunk = uploaded[unit as usize].clone();
        let request = v1::UploadChunkRequest { lease_id: lease.lease_id, unit, chunk, games: 2 };
        let stop = worker.upload_chunk(request.clone()).await.unwrap().into_inner().stop;
        assert_eq!(stop, unit == 1);
        worker.upload_chunk(request).await.unwrap();
    }
    let records: u64 =
        uploaded.iter().map(|chunk| xq_engine::xiangqi::data::read_chunk(chunk).unwrap().len() as u64).sum();
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!((state.state.as_str(), state.positions), ("finished", records));
    let chunks = crate::common::collect(
        admin
            .stream_training_data(v1::TrainingDataRequest { job_id: job.job_id, ..Default::default() })
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert_eq!(chunks.iter().map(|c| c.unit).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(chunks[0].chunk, uploaded[0]);

    // Other bytes for a stored unit change nothing that is stored or streamed.
    let other = unit_chunk(&spec, 0, 30);
    assert_ne!(other, uploaded[0]);
    let request = v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk: other, games: 2 };
    worker.upload_chunk(request).await.unwrap();
    let again = crate::common::collect(
        admin
            .stream_training_data(v1::TrainingDataRequest { job_id: job.job_id, ..Default::default() })
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert_eq!(again, chunks);
    let state = admin.get_job(v1::JobId { job_id: job.job_id }).await.unwrap().into_inner();
    assert_eq!(state.positions, records);

    // A caller that holds some chunks is sent the others only: a loop's window
    // downloads each older generation again (#59's data reuse).
    let rest = v1::TrainingDataRequest { job_id: job.job_id, present_units: vec![0, 7] };
    let rest = crate::common::collect(admin.stream_training_data(rest).await.unwrap().into_inner()).await;
    assert_eq!(rest, chunks[1..]);
    // It lists at most the job's units: the coordinator keeps the list while it streams.
    let too_many = v1::TrainingDataRequest { job_id: job.job_id, present_units: (0..=job.units_total).collect() };
    let refused = admin.stream_training_data(too_many).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("present_units"), "{refused:?}");
    let local = TempDir::new("chunks-download");
    let first = xq_proto::client::download_training_data(&mut admin, job.job_id, &local.0).await.unwrap();
    assert_eq!((first.written, first.present), (2, 0));
    let second = xq_proto::client::download_training_data(&mut admin, job.job_id, &local.0).await.unwrap();
    assert_eq!((second.written, second.present), (0, 2));

    // A stored chunk damaged on disk is refused on read, naming its file, whether a
    // byte changed or the file was cut short.
    let dir = served.data.join(format!("chunks/{}", job.job_id));
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut bytes = std::fs::read(&files[1]).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&files[1], &bytes).unwrap();
    let stream = admin
        .stream_training_data(v1::TrainingDataRequest { job_id: job.job_id, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let damaged = read_until_error(stream).await;
    assert_eq!(damaged.code(), Code::DataLoss, "{damaged:?}");
    assert!(damaged.message().contains("do not hash") && damaged.message().contains("chunks/"), "{damaged:?}");
    // A unit the caller holds is not read at all.
    let around = v1::TrainingDataRequest { job_id: job.job_id, present_units: vec![1] };
    let around = crate::common::collect(admin.stream_training_data(around).await.unwrap().into_inner()).await;
    assert_eq!(around, chunks[..1]);
    std::fs::write(&files[1], &bytes[..bytes.len() / 2]).unwrap();
    let stream = admin
        .stream_training_data(v1::TrainingDataRequest { job_id: job.job_id, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let cut = read_until_error(stream).await;
    assert_eq!(cut.code(), Code::DataLoss, "{cut:?}");
    assert!(cut.message().contains("shorter than"), "{cut:?}");
}

/// Reads a stream until it fails; its error.
async fn read_until_error<T>(mut stream: tonic::Streaming<T>) -> tonic::Status {
    loop {
        match stream.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without an error"),
            Err(status) => return status,
        }
    }
}

/// A chunk holding more records than its unit's games can make is refused: 2 games of
/// at most 10 plies make at most 20 records.
#[tokio::test]
async fn a_chunk_larger_than_its_unit_can_be_is_refused() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, max_plies: 10, ..Default::default() };
    admin
        .create_self_play(v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() })
        .await
        .unwrap();
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let upload = |chunk| v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk, games: 2 };
    // The unit's two games of ten plies, one record more.
    let mut records = unit_records(&spec, 0, 20);
    assert_eq!(records.len(), 20);
    records.push(Record { ply: 10, ..records[19].clone() });
    let status = worker.upload_chunk(upload(write_chunk(&records))).await.unwrap_err();
    assert!(status.message().contains("21 records, more than 2 games of at most 10 plies"), "{}", status.message());
    assert!(worker.upload_chunk(upload(unit_chunk(&spec, 0, 20))).await.unwrap().into_inner().stop);
}

/// A chunk of `count` copies of `record`, made as an attacker makes it: a few KB whose
/// header and checksum are right and whose payload decodes to `count` full records.
fn chunk_bomb(record: &Record, count: usize) -> Vec<u8> {
    const HEADER_LEN: usize = 32;
    let one = write_chunk(std::slice::from_ref(record));
    let encoded = zstd::bulk::decompress(&one[HEADER_LEN..], 1 << 10).unwrap();
    let payload = encoded.repeat(count);
    let compressed = zstd::bulk::compress(&payload, 19).unwrap();
    let mut chunk = one[..12].to_vec();
    for field in [count, payload.len(), compressed.len(), crc32fast::hash(&payload) as usize, 0] {
        chunk.extend_from_slice(&(field as u32).to_le_bytes());
    }
    chunk.extend_from_slice(&compressed);
    chunk
}

/// The review's chunk bomb (2026-11-28, F1): one worker token sends twelve chunks at once,
/// each a few KB whose header claims 2^20 records (about 800 MB decoded), to a real
/// coordinator process (twelve aborted it). Each is refused by its header, naming its
/// count and the unit's bound, before its payload is decompressed: the coordinator's
/// peak memory grows by less than 64 MB over the attack, and the unit's honest chunk
/// counts after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_bomb_is_refused_by_its_header_with_the_coordinator_s_memory_flat() {
    let dir = TempDir::new("chunk-bomb");
    let (coordinator, address) = crate::cluster::start_coordinator(&dir.0, 0, 600).await;
    let pid = coordinator.id().unwrap();
    let token = crate::cluster::token(&dir.0);
    let mut admin = client(address, &token).await;
    let spec = v1::SelfPlaySpec { nodes: 1000, games_per_unit: 2, max_plies: 10, ..Default::default() };
    let request = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() };
    admin.create_self_play(request).await.unwrap();
    let (mut worker, _) = registered_worker_at(address, &token, "bomber", &[], 1).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let bomb = chunk_bomb(&unit_records(&spec, 0, 20)[0], xq_engine::xiangqi::data::MAX_RECORDS);
    assert!(bomb.len() < 8 << 10, "a bomb of {} bytes", bomb.len());
    let header = xq_engine::xiangqi::data::read_header(&bomb).unwrap();
    assert_eq!(header.records, 1 << 20, "the header claims a million records");

    let before = process_memory(pid, "VmHWM");
    let started = std::time::Instant::now();
    let attacks: Vec<_> = (0..12)
        .map(|_| {
            let mut worker = worker.clone();
            let request = v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk: bomb.clone(), games: 2 };
            tokio::spawn(async move { worker.upload_chunk(request).await })
        })
        .collect();
    for attack in attacks {
        let status = attack.await.unwrap().unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().contains("1048576 records, more than 2 games of at most 10 plies"),
            "{}",
            status.message()
        );
    }
    let after = process_memory(pid, "VmHWM");
    eprintln!(
        "12 chunk bombs refused in {:.1} ms; the coordinator's peak memory {} MB before, {} MB after",
        started.elapsed().as_secs_f64() * 1e3,
        before >> 20,
        after >> 20
    );
    assert!(after < before + (64 << 20), "peak memory {} MB before the bombs, {} MB after", before >> 20, after >> 20);
    let honest =
        v1::UploadChunkRequest { lease_id: lease.lease_id, unit: 0, chunk: unit_chunk(&spec, 0, 20), games: 2 };
    assert!(worker.upload_chunk(honest).await.unwrap().into_inner().stop, "the honest chunk counts");
}

/// A self-play chunk is checked beyond its records: its games are played again from
/// the unit's seeded openings by the job's rules. Records that are not the games they
/// claim to be (results flipped, positions shuffled) are refused, naming the game and
/// the record, and neither stored nor counted, though counted against the worker; the
/// unit's honest chunk then counts.
#[tokio::test]
async fn a_chunk_of_forged_games_is_refused_naming_game_and_record_and_the_honest_one_counts() {
    let served = serve(BACKENDS[0], config()).await;
    let mut admin = client(served.address, &served.client_token).await;
    let spec = v1::SelfPlaySpec {
        nodes: 1000,
        games_per_unit: 3,
        random_plies: 6,
        seed: 9,
        max_plies: 60,
        ..Default::default()
    };
    let request = v1::CreateSelfPlayRequest { spec: Some(spec.clone()), units: 1, ..Default::default() };
    let job = admin.create_self_play(request).await.unwrap().into_inner().job_id;
    let mut worker = registered_worker(&served, "w", &[]).await;
    let lease = worker.lease(v1::LeaseRequest { concurrency: 1 }).await.unwrap().into_inner().lease.unwrap();
    let upload = |records: &[Record]| v1::UploadChunkRequest {
        lease_id: lease.lease_id,
        unit: 0,
        chunk: write_chunk(records),
        games: 3,
    };
    let honest = unit_records(&spec, 0, 30);
    let first_game = honest.iter().skip(1).position(|r| r.ply == 6).expect("three games") + 1;

    // Every record credited to the side that did not win the first game.
    let flipped_to = match honest[0].result {
        Outcome::Win(Color::Red) => Outcome::Win(Color::Black),
        _ => Outcome::Win(Color::Red),
    };
    let flipped: Vec<Record> = honest.iter().map(|r| Record { result: flipped_to, ..r.clone() }).collect();
    let status = worker.upload_chunk(upload(&flipped)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let named = format!("game 0 (from record 0), record {}: result {}", first_game - 1, flipped_to.pgn());
    assert!(status.message().starts_with(&format!("chunk: {named}")), "{}", status.message());
    assert!(status.message().contains("does not fit the game's end"), "{}", status.message());

    // Two positions of the second game swapped, with their best moves.
    let mut shuffled = honest.clone();
    let (a, b) = (first_game + 3, first_game + 4);
    shuffled.swap(a, b);
    (shuffled[a].ply, shuffled[b].ply) = (honest[a].ply, honest[b].ply);
    let status = worker.upload_chunk(upload(&shuffled)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let named = format!("game 1 (from record {first_game}), record {a}: its position is not the one");
    assert!(status.message().starts_with(&format!("chunk: {named}")), "{}", status.message());

    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!((state.units_done, state.positions, state.refused_reports), (0, 0, 2));
    assert!(!served.data.join(format!("chunks/{job}")).exists(), "nothing of a refused chunk is stored");

    assert!(worker.upload_chunk(upload(&honest)).await.unwrap().into_inner().stop);
    let state = admin.get_job(v1::JobId { job_id: job }).await.unwrap().into_inner();
    assert_eq!((state.state.as_str(), state.positions), ("finished", honest.len() as u64));
}
