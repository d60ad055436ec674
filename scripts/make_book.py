"""Balanced four-ply openings for engine tests: every sequence of common first moves
for Red, replies for Black, and second moves of each from the same lists, played by
xq-engine (which refuses illegal ones), deduplicated by position, and kept when a
short search scores it within --balance centipawns (an unbalanced opening decides
its pair's games, which then tell little about the engines).

Usage: make_book.py ENGINE OUTPUT [--depth D] [--balance CP]
"""

import argparse
import itertools

import uci_engine

RED = ["h2e2", "b2e2", "h0g2", "b0c2", "c0e2", "g0e2", "g3g4", "c3c4", "h2f2", "b2d2"]
BLACK = ["h9g7", "b9c7", "h7e7", "b7e7", "c9e7", "g9e7", "g6g5", "c6c5", "h7f7", "b7d7"]


class Engine(uci_engine.Engine):
    def position(self, moves):
        """The FEN after `moves` from the start, or None if one of them is illegal."""
        self.send("position startpos moves " + " ".join(moves))
        self.send("d")
        lines = self.until(lambda line: line.startswith("info string fen "))
        if any("cannot be played" in line for line in lines):
            return None
        return lines[-1].removeprefix("info string fen ")

    def score(self, depth):
        """The score, centipawns for the side to move, of a search to `depth`."""
        self.send(f"go depth {depth}")
        lines = self.until(lambda line: line.startswith("bestmove"))
        scores = [line.split(" score ")[1].split() for line in lines if " score " in line]
        kind, value = scores[-1][0], int(scores[-1][1])
        return value if kind == "cp" else (100_000 if value > 0 else -100_000)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("engine")
    parser.add_argument("output")
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--balance", type=int, default=60)
    args = parser.parse_args()
    engine = Engine(args.engine)
    seen, kept, illegal = set(), [], 0
    for moves in itertools.product(RED, BLACK, RED, BLACK):
        fen = engine.position(moves)
        if fen is None:
            illegal += 1
            continue
        # The position without its move counters: transpositions are one opening.
        key = " ".join(fen.split()[:2])
        if key in seen:
            continue
        seen.add(key)
        if abs(engine.score(args.depth)) <= args.balance:
            kept.append(fen)
    engine.quit()
    with open(args.output, "w") as out:
        out.write(
            f"# Balanced positions after four plies of common openings (scripts/make-book 4):\n"
            f"# scored within {args.balance} cp by xq-engine at depth {args.depth}.\n"
        )
        out.writelines(fen + "\n" for fen in kept)
    print(
        f"wrote {len(kept)} positions to {args.output}: {len(seen)} distinct of "
        f"{len(RED) ** 2 * len(BLACK) ** 2} sequences ({illegal} illegal), "
        f"{len(seen) - len(kept)} outside {args.balance} cp"
    )


if __name__ == "__main__":
    main()
