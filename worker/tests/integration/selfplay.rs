//! Self-play chunks are re-read bit for bit, every record a legal position with a
//! legal best move and the game's result.

use xq_engine::xiangqi::data::{read_chunk, write_chunk};
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
