//! The notation of Chinese game records (炮二平五, 馬８進７, 前車進一): the WXF
//! notation's four parts written in Chinese characters, which WXF Article 7 transcribes
//! letter for letter. A move is read by transcribing it to WXF and reading that, so
//! both notations pick the same piece the same way.
//!
//! Read: simplified and traditional characters and both sides' piece names (車/俥,
//! 馬/傌, 相/象, 仕/士, 帥/將, 炮/砲/包, 兵/卒); files and steps as Chinese numerals
//! (Red's usual form), full-width or ASCII digits (Black's); 前, 中 and 後/后 for
//! tandem pieces (中 only for the middle one of three pawns on a file).
//!
//! Not read (refused as not of this shape, naming the move): the five-character form
//! that names the file as well when two files hold tandem pawns (前兵七進一) and pawns
//! numbered from the front when four or five share a file (一兵, 二兵, ...). Neither
//! occurs in the 20,486 master games the collection tests were drawn from.

use super::MoveTextError;
use super::wxf::{column, parse_wxf, wxf_file};
use crate::xiangqi::{Move, PieceKind, Position};

fn piece(c: char) -> Option<PieceKind> {
    Some(match c {
        '車' | '车' | '俥' | '伡' => PieceKind::Rook,
        '馬' | '马' | '傌' | '㐷' => PieceKind::Horse,
        '相' | '象' => PieceKind::Elephant,
        '仕' | '士' => PieceKind::Advisor,
        '帥' | '帅' | '將' | '将' => PieceKind::King,
        '炮' | '砲' | '包' => PieceKind::Cannon,
        '兵' | '卒' => PieceKind::Pawn,
        _ => return None,
    })
}

/// A file or a number of steps, 1..9.
fn numeral(c: char) -> Option<u8> {
    let chinese = ['一', '二', '三', '四', '五', '六', '七', '八', '九'];
    if let Some(index) = chinese.iter().position(|&n| n == c) {
        return Some(index as u8 + 1);
    }
    let ascii = match c {
        '１'..='９' => char::from_u32(c as u32 - '１' as u32 + '1' as u32)?,
        other => other,
    };
    ascii.to_digit(10).filter(|d| (1..=9).contains(d)).map(|d| d as u8)
}

fn movement(c: char) -> Option<char> {
    match c {
        '進' | '进' => Some('+'),
        '退' => Some('-'),
        '平' => Some('='),
        _ => None,
    }
}

/// Front, middle or rear.
fn place(c: char) -> Option<char> {
    match c {
        '前' => Some('+'),
        '中' => Some('2'),
        '後' | '后' => Some('-'),
        _ => None,
    }
}

/// Reads a move in Chinese notation and checks that it is legal.
pub fn parse_chinese(position: &Position, text: &str) -> Result<Move, MoveTextError> {
    let syntax = |problem| MoveTextError::Syntax { text: text.to_owned(), notation: "Chinese", problem };
    let chars: Vec<char> = text.trim().chars().collect();
    let &[c0, c1, c2, c3] = chars.as_slice() else {
        return Err(syntax("expected four characters such as 炮二平五 or 前車進一"));
    };
    let sign = movement(c2).ok_or_else(|| syntax("the third character is 進, 退 or 平"))?;
    let arg = numeral(c3).ok_or_else(|| syntax("the last character is a numeral 一..九 or a digit 1..9"))?;
    let wxf = match (piece(c0), place(c0), piece(c1), numeral(c1)) {
        (Some(kind), _, _, Some(file)) => format!("{}{file}{sign}{arg}", kind.wxf_letter()),
        (None, Some('2'), Some(PieceKind::Pawn), _) => {
            let color = position.side_to_move();
            let files: Vec<u8> = (0..9).filter(|&f| column(position, color, PieceKind::Pawn, f).len() == 3).collect();
            let &[file] = files.as_slice() else {
                return Err(syntax("中兵 names the middle pawn of a file of three, and no one file holds three"));
            };
            format!("2{}{sign}{arg}", wxf_file(color, file))
        }
        (None, Some('2'), Some(_), _) => return Err(syntax("only pawns have a middle piece (中)")),
        (None, Some(mark), Some(kind), _) => format!("{mark}{}{sign}{arg}", kind.wxf_letter()),
        _ => return Err(syntax("it starts with a piece and its file, or 前, 中 or 後 and a piece")),
    };
    parse_wxf(position, &wxf).map_err(|error| match error {
        MoveTextError::Syntax { problem, .. } => {
            MoveTextError::Syntax { text: text.to_owned(), notation: "Chinese", problem }
        }
        MoveTextError::Illegal { reason, .. } => MoveTextError::Illegal { text: text.to_owned(), reason },
        MoveTextError::NoSuchMove { problem, .. } => MoveTextError::NoSuchMove { text: text.to_owned(), problem },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::notation::{Dialect, parse_uci};

    fn check(fen: &str, chinese: &str, uci: &str) {
        let position = Position::from_fen(fen).unwrap();
        let expected = parse_uci(&position, uci, Dialect::ZeroBased).unwrap();
        assert_eq!(parse_chinese(&position, chinese), Ok(expected), "{fen} {chinese}");
    }

    #[test]
    fn opening_moves_as_chinese_records_write_them() {
        let start = crate::xiangqi::fen::START_FEN;
        check(start, "炮二平五", "h2e2");
        check(start, "马二进三", "h0g2");
        check(start, "傌八進七", "b0c2");
        check(start, "俥一進一", "i0i1");
        check(start, "相三进五", "g0e2");
        check(start, "仕四進五", "f0e1");
        check(start, "兵七进一", "c3c4");
        let black = "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b";
        check(black, "馬８進７", "h9g7");
        check(black, "马2进3", "b9c7");
        check(black, "砲８平５", "h7e7");
        check(black, "包2平5", "b7e7");
        check(black, "車９進１", "i9i8");
        check(black, "卒３進１", "c6c5");
        check(black, "將５進１", "e9e8");
    }

    #[test]
    fn tandem_pieces_are_front_middle_and_rear() {
        let rooks = "3k5/9/9/9/9/9/9/R8/R8/4K4 w";
        check(rooks, "前车进一", "a2a3");
        check(rooks, "後俥平六", "a1d1");
        let three = "5k3/9/4P4/4P4/4P4/9/9/9/9/3K5 w";
        check(three, "前兵进一", "e7e8");
        check(three, "中兵平六", "e6d6");
        check(three, "后兵平六", "e5d5");
    }

    #[test]
    fn bad_text_is_refused_naming_it_and_why() {
        let position = Position::startpos();
        for (text, expected) in [
            ("炮二平", "four characters"),
            ("炮二走五", "進, 退 or 平"),
            ("炮二平十", "numeral"),
            ("王二平五", "starts with a piece"),
            ("中炮平五", "only pawns"),
            ("中兵平五", "no one file holds three"),
            ("炮三平五", "'炮三平五' cannot be played: the side to move has no cannon there"),
            ("車一進五", "'車一進五' cannot be played"),
        ] {
            let message = parse_chinese(&position, text).unwrap_err().to_string();
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
