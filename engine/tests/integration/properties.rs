//! Property tests: what must hold in every position.

use proptest::prelude::*;
use xq_engine::xiangqi::movegen::{self, MoveList, Selection};
use xq_engine::xiangqi::notation::{
    Dialect, format_iccs, format_uci, format_wxf, parse_any, parse_chinese, parse_iccs, parse_uci, parse_wxf,
};
use xq_engine::xiangqi::rules::identity::Identities;
use xq_engine::xiangqi::rules::nature::{allowed_natures, classify};
use xq_engine::xiangqi::{Position, fen, perft};

use crate::common::random_positions;

fn positions_from(seed: u64) -> Vec<Position> {
    random_positions(seed, 2, 80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn fen_round_trips(seed in any::<u64>()) {
        for position in positions_from(seed) {
            let text = fen::to_fen(&position);
            let (parsed, _) = fen::parse_composed(&text).unwrap();
            prop_assert_eq!(&parsed, &position);
            prop_assert_eq!(fen::to_fen(&parsed), text);
        }
    }

    #[test]
    fn make_unmake_restores_everything_and_hash_stays_exact(seed in any::<u64>()) {
        for mut position in positions_from(seed) {
            let before = position.clone();
            prop_assert_eq!(position.hash(), position.hash_from_scratch());
            for &mv in movegen::legal_moves(&before).iter() {
                let undo = position.make_move(mv);
                prop_assert_eq!(position.hash(), position.hash_from_scratch(), "after {}", mv);
                prop_assert!(!position.is_king_attacked(!position.side_to_move()), "{} leaves the king attacked", mv);
                position.unmake_move(undo);
                prop_assert_eq!(&position, &before);
            }
        }
    }

    #[test]
    fn captures_and_quiets_partition_the_legal_moves(seed in any::<u64>()) {
        for position in positions_from(seed) {
            let all = movegen::legal_moves(&position);
            let (mut captures, mut quiets) = (MoveList::new(), MoveList::new());
            movegen::generate_into(&position, Selection::Captures, &mut captures);
            movegen::generate_into(&position, Selection::Quiets, &mut quiets);
            prop_assert!(captures.iter().all(|mv| position.piece_at(mv.to()).is_some()));
            prop_assert!(quiets.iter().all(|mv| position.piece_at(mv.to()).is_none()));
            let mut split: Vec<_> = captures.iter().chain(quiets.iter()).map(|mv| mv.to_string()).collect();
            let mut whole: Vec<_> = all.iter().map(|mv| mv.to_string()).collect();
            split.sort();
            whole.sort();
            prop_assert_eq!(split, whole);
            prop_assert_eq!(movegen::count_legal(&position), all.len() as u64);
            prop_assert_eq!(movegen::has_legal_move(&position), !all.is_empty());
        }
    }

    #[test]
    fn gives_check_and_checkers_agree_with_the_position_after_the_move(seed in any::<u64>()) {
        for mut position in positions_from(seed) {
            for &mv in movegen::legal_moves(&position.clone()).iter() {
                let predicted = position.gives_check(mv);
                let undo = position.make_move(mv);
                prop_assert_eq!(predicted, position.in_check(), "{} {}", position, mv);
                let king = position.king(position.side_to_move());
                let attackers = position.attackers_to(king, !position.side_to_move());
                prop_assert_eq!(position.checkers(), attackers, "{}", position);
                position.unmake_move(undo);
            }
        }
    }

    #[test]
    fn every_legal_move_is_classified_without_a_panic(seed in any::<u64>()) {
        // The judge describes every ply of every game a worker reports.
        for position in positions_from(seed) {
            let ids = Identities::new(&position);
            for &mv in movegen::legal_moves(&position).iter() {
                let nature = classify(&position, &ids, mv);
                let allowed = allowed_natures(&position, &ids, mv);
                prop_assert!(!nature.check || !(allowed.kill || allowed.capture_after_check), "{mv} in {}", fen::to_fen(&position));
            }
        }
    }

    #[test]
    fn every_notation_round_trips(seed in any::<u64>()) {
        for position in positions_from(seed) {
            for &mv in movegen::legal_moves(&position).iter() {
                for dialect in [Dialect::ZeroBased, Dialect::OneBased] {
                    prop_assert_eq!(parse_uci(&position, &format_uci(mv, dialect), dialect).unwrap(), mv);
                }
                prop_assert_eq!(parse_iccs(&position, &format_iccs(mv)).unwrap(), mv);
                let wxf = format_wxf(&position, mv).unwrap();
                prop_assert_eq!(parse_wxf(&position, &wxf).unwrap(), mv, "{} {}", position, wxf);
                for text in [format_uci(mv, Dialect::ZeroBased), format_iccs(mv), wxf.clone()] {
                    prop_assert_eq!(parse_any(&position, &text).unwrap(), mv, "{} {}", position, text);
                }
                if let Some(chinese) = chinese_of(&wxf, position.side_to_move() == xq_engine::color::Color::Red) {
                    prop_assert_eq!(parse_chinese(&position, &chinese).unwrap(), mv, "{} {}", position, chinese);
                    prop_assert_eq!(parse_any(&position, &chinese).unwrap(), mv, "{} {}", position, chinese);
                }
            }
        }
    }

    #[test]
    fn mirrored_and_colour_flipped_positions_have_the_same_tree(seed in any::<u64>()) {
        for mut position in positions_from(seed).into_iter().step_by(8) {
            let count = perft::perft(&mut position, 2);
            prop_assert_eq!(perft::perft(&mut position.mirrored(), 2), count);
            prop_assert_eq!(perft::perft(&mut position.color_flipped(), 2), count);
        }
    }

    #[test]
    fn parsers_never_panic_on_arbitrary_text(text in "\\PC{0,90}") {
        let position = Position::startpos();
        let _ = fen::parse_composed(&text);
        let _ = parse_uci(&position, &text, Dialect::ZeroBased);
        let _ = parse_uci(&position, &text, Dialect::OneBased);
        let _ = parse_iccs(&position, &text);
        let _ = parse_wxf(&position, &text);
        let _ = parse_chinese(&position, &text);
        let _ = parse_any(&position, &text);
        let _ = xq_engine::xiongqi::fen::parse(&text);
    }

    #[test]
    fn chinese_notation_never_panics_on_notation_like_text(text in "[前中後后车車马馬相象仕士帅帥将將炮砲包兵卒一二三五九１５９15][一二五九１５９159兵炮車][進进退平][一二五九１５９159]") {
        for fen in ["rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C5C1/9/RNBAKABNR w", "5k3/9/4P4/4P4/4P4/9/9/9/9/3K5 w", "3k5/9/9/9/9/9/9/R8/R8/4K4 b"] {
            let _ = parse_chinese(&Position::from_fen(fen).unwrap(), &text);
        }
    }

    #[test]
    fn pgn_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = xq_engine::xiangqi::pgn::parse_pgn_bytes(&bytes);
    }

    #[test]
    fn each_game_of_a_pgn_file_reads_alone_as_it_reads_in_the_file(
        lines in proptest::collection::vec(proptest::sample::select(PGN_LINES.to_vec()), 0..40)
    ) {
        let text = lines.join("\n");
        if let Ok(file) = xq_engine::xiangqi::pgn::PgnFile::read(text.as_bytes()) {
            let games = xq_engine::xiangqi::pgn::parse_pgn(&text).unwrap();
            prop_assert_eq!(file.len(), games.len());
            for (index, game) in games.iter().enumerate() {
                prop_assert_eq!(&file.games(index..index + 1), std::slice::from_ref(game), "{}", text);
            }
        }
    }

    #[test]
    fn fen_parser_never_panics_on_fen_like_text(text in "[rnbakcpRNBAKCPHEhe1-9/]{0,70} [wbrx] (- - )?[0-9]{0,3} ?[0-9]{0,3}") {
        let _ = fen::parse_composed(&text);
    }

    #[test]
    fn xiongqi_fen_parser_never_panics_on_fen_like_text(text in "[gabrhcsdeGABRHCSDE1-9/]{0,60} [wbx] (- - )?[0-9]{0,3} ?[0-9]{0,3}") {
        if let Ok(position) = xq_engine::xiongqi::fen::parse(&text) {
            let printed = position.to_string();
            prop_assert_eq!(xq_engine::xiongqi::fen::parse(&printed).unwrap().to_string(), printed);
        }
    }
}

/// Lines PGN files hold, well and badly formed, for files made of them at random.
const PGN_LINES: [&str; 16] = [
    "[Event \"a\"]",
    "[Result \"1-0\"]",
    "[FEN \"4k4/9/9/9/9/9/9/9/9/3K5 w - - 0 1\"]",
    "",
    "1. h2e2 h9g7",
    "2. 炮二平五 {a note}",
    "h0g2",
    "{ a comment",
    "that closes } 1-0",
    "{[Event \"not a tag\"]}",
    "; a rest of line",
    "35=6 +C.5 *",
    "1/2-1/2",
    "   [Site \"indented\"]   ",
    "{",
    "}",
];

/// A WXF move as Chinese records write it, character for character (WXF Article 7):
/// Red's numbers as Chinese numerals, Black's as full-width digits; `None` for a pawn's
/// place form (`35=6`), which Chinese writes otherwise.
fn chinese_of(wxf: &str, red: bool) -> Option<String> {
    let chars: Vec<char> = wxf.chars().collect();
    let piece = |c: char| {
        let (red_name, black_name) = match c {
            'R' => ('俥', '車'),
            'H' => ('傌', '馬'),
            'E' => ('相', '象'),
            'A' => ('仕', '士'),
            'K' => ('帥', '將'),
            'C' => ('炮', '砲'),
            'P' => ('兵', '卒'),
            _ => return None,
        };
        Some(if red { red_name } else { black_name })
    };
    let number = |c: char| {
        let digit = c.to_digit(10)? as usize;
        Some(if red {
            "一二三四五六七八九".chars().nth(digit - 1)?
        } else {
            "１２３４５６７８９".chars().nth(digit - 1)?
        })
    };
    let movement = |c: char| match c {
        '+' => Some('進'),
        '-' => Some('退'),
        _ => Some('平'),
    };
    let first_two = match (chars[0], chars[1]) {
        ('+', p) => ['前', piece(p)?],
        ('-', p) => ['後', piece(p)?],
        (p, f) => [piece(p)?, number(f)?],
    };
    Some([first_two[0], first_two[1], movement(chars[2])?, number(chars[3])?].iter().collect())
}
