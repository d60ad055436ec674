//! Self-play chunks are re-read bit for bit, every record a legal position with a
//! legal best move and the game's result, for both games.

use xq_engine::variant::Variant;
use xq_engine::xiangqi::data::{read_chunk, read_xiongqi_chunk, write_chunk, write_xiongqi_chunk};
use xq_engine::xiangqi::rules::RuleSet;
use xq_worker::selfplay::{SelfPlaySettings, run_selfplay};

#[test]
fn selfplay_chunks_reread_bit_for_bit() {
    let out = std::env::temp_dir().join(format!("xq-selfplay-{}", std::process::id()));
    let settings = SelfPlaySettings {
        nodes: 300,
        games: 6,
        random_plies: 6,
        seed: 11,
        threads: 2,
        chunk_records: 200,
        out: out.clone(),
        rules: RuleSet::Wxf,
        max_plies: 200,
        variant: Variant::Xiangqi,
    };
    let report = run_selfplay(&settings).expect("self-play runs");
    assert!(report.positions > 100);
    let mut reread = 0;
    for path in &report.chunks {
        let bytes = std::fs::read(path).expect("chunk file");
        let records = read_chunk(&bytes).expect("a valid chunk");
        assert_eq!(write_chunk(&records), bytes, "{}", path.display());
        assert!(records.iter().all(|r| r.ply >= 6));
        reread += records.len();
    }
    assert_eq!(reread, report.positions);
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn xiongqi_selfplay_chunks_reread_bit_for_bit() {
    let out = std::env::temp_dir().join(format!("xq-selfplay-xiongqi-{}", std::process::id()));
    let settings = SelfPlaySettings {
        nodes: 300,
        games: 6,
        random_plies: 4,
        seed: 5,
        threads: 2,
        chunk_records: 150,
        out: out.clone(),
        rules: RuleSet::Wxf,
        max_plies: 200,
        variant: Variant::Xiongqi,
    };
    let report = run_selfplay(&settings).expect("self-play runs");
    assert!(report.positions > 50, "{report:?}");
    let mut reread = 0;
    let mut decided = 0;
    for path in &report.chunks {
        let bytes = std::fs::read(path).expect("chunk file");
        let records = read_xiongqi_chunk(&bytes).expect("a valid Xiongqi chunk");
        assert_eq!(write_xiongqi_chunk(&records), bytes, "{}", path.display());
        assert!(read_chunk(&bytes).is_err(), "not readable as Xiangqi");
        assert!(records.iter().all(|r| r.ply >= 4));
        decided += records.iter().filter(|r| r.result != xq_engine::xiangqi::rules::Outcome::Draw).count();
        reread += records.len();
    }
    assert_eq!(reread, report.positions);
    assert!(decided > 0, "some games end by the rules");
    std::fs::remove_dir_all(&out).ok();
}
