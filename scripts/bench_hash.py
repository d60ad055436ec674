"""What a larger hash table saves a UCI engine in a match: the nodes it needs to reach a
fixed depth on the positions it met in real games, played in order in one process (a
new game announced by `ucinewgame`), so that the table carries over from one move to
the next as it does in a match. One run per hash size; the node counts of a
single-threaded search to a fixed depth do not depend on the machine's load, so the
ratios are exact whatever else runs.

The games are a PGN written by `xq-worker match` (plain or `.zst`): each game's `FEN`
tag and its moves in the engine's notation. The positions are those where the engine
named by --side was to move.

Usage: python bench_hash.py GAMES.pgn[.zst] --engine COMMAND --side NAME
           [--depth 14] [--games 6] [--hash 16 --hash 256 ...]
Prints per hash size the positions, the total nodes and each size's ratio to the first.
"""

import argparse
import re
import subprocess

import uci_engine

MOVE = re.compile(r"\b[a-i]\d[a-i]\d\b")
TAG = re.compile(r'\[(\w+) "([^"]*)"\]')


def read_games(path, count):
    """(start FEN, moves, White's name, Black's name) of the first `count` games."""
    if path.endswith(".zst"):
        text = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True, text=True).stdout
    else:
        with open(path) as file:
            text = file.read()
    games = []
    for game in text.split("[Event ")[1:count + 1]:
        tags, _, body = game.partition("\n\n")
        tags = dict(TAG.findall(tags))
        moves = MOVE.findall(re.sub(r"\{[^}]*\}", "", body))
        games.append((tags["FEN"], moves, tags["White"], tags["Black"]))
    return games


class Engine(uci_engine.Engine):
    def __init__(self, path, hash_mb):
        super().__init__(path)
        self.send(f"setoption name Hash value {hash_mb}")
        self.ready()

    def ready(self):
        self.send("isready")
        self.until(lambda line: line == "readyok")

    def nodes_to_depth(self, fen, moves, depth):
        played = f" moves {' '.join(moves)}" if moves else ""
        self.send(f"position fen {fen}{played}")
        self.send(f"go depth {depth}")
        lines = self.until(lambda line: line.startswith("bestmove"))
        last = [line for line in lines if line.startswith("info") and " nodes " in line][-1]
        return int(re.search(r" nodes (\d+)", last)[1])


def run(command, hash_mb, games, side, depth):
    """(positions, total nodes) over the games with this hash size."""
    engine = Engine(command, hash_mb)
    positions = nodes = 0
    for fen, moves, white, black in games:
        if side not in (white, black):
            raise SystemExit(f"{side!r} played neither side of {white} - {black}")
        engine.send("ucinewgame")
        engine.ready()
        ours = 0 if white == side else 1
        for ply in range(ours, len(moves), 2):
            nodes += engine.nodes_to_depth(fen, moves[:ply], depth)
            positions += 1
    engine.quit()
    return positions, nodes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pgn")
    parser.add_argument("--engine", required=True, help="the engine's command")
    parser.add_argument("--side", required=True, help="the engine's name in the PGN's White and Black tags")
    parser.add_argument("--depth", type=int, default=14)
    parser.add_argument("--games", type=int, default=6)
    parser.add_argument("--hash", type=int, action="append", help="megabytes; repeat (default 16 and 256)")
    args = parser.parse_args()
    games = read_games(args.pgn, args.games)
    if not games:
        parser.error(f"{args.pgn} holds no games")
    first = None
    for hash_mb in args.hash or [16, 256]:
        positions, nodes = run(args.engine, hash_mb, games, args.side, args.depth)
        first = first or nodes
        print(f"Hash {hash_mb} MB: {positions} positions of {len(games)} games, {nodes} nodes to depth "
              f"{args.depth}, {nodes / positions:.0f} a position, {nodes / first:.4f}x the first size's",
              flush=True)


if __name__ == "__main__":
    main()
