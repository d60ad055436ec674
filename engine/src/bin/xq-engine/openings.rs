//! `xq-engine openings`: a range of drawn openings judged, the kept ones printed as
//! FEN lines, a tally on stderr as it goes (a book of 100,000 takes hours).

use std::collections::HashSet;
use std::io::Write;
use std::ops::Range;
use std::time::Instant;

use xq_engine::xiangqi::openings::{OpeningSettings, Verdict, draw, judge};

/// Draws and judges openings `range`, writing each kept one's FEN to `out`.
pub fn write(settings: &OpeningSettings, range: Range<u64>, out: &mut impl Write) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut seen = HashSet::new();
    let (mut kept, mut repeated, mut unbalanced, mut unfit) = (0u64, 0u64, 0u64, 0u64);
    let total = range.end - range.start;
    for (done, n) in (1u64..).zip(range) {
        let verdict = draw(settings, n).map_or(Verdict::Unfit, |drawn| judge(settings, &drawn, &mut seen));
        match verdict {
            Verdict::Kept(fen) => {
                writeln!(out, "{fen}")?;
                kept += 1;
            }
            Verdict::Repeated => repeated += 1,
            Verdict::Unbalanced(_) => unbalanced += 1,
            Verdict::Unfit => unfit += 1,
        }
        if done.is_multiple_of(1000) || done == total {
            out.flush()?;
            eprintln!(
                "openings: {} of {total} drawn in {:.0} s: {kept} kept, {repeated} repeated, {unbalanced} outside \
                 {} cp, {unfit} unfit",
                done,
                started.elapsed().as_secs_f64(),
                settings.balance
            );
        }
    }
    Ok(())
}
