"""Fairy-Stockfish's verdicts on Xiangqi games, for a verification job's reference.

Each input line is a JSON object: the start "fen", the "moves" in Fairy-Stockfish's
coordinates (ranks 1..10) and the "plies" (1-based, ascending) at which a ruling can
fall. Each output line is a JSON object: the first of those plies at which the game is
over under Fairy-Stockfish's rules (no legal move, or its repetition and move-count
rules) and the value there for the side to move (32000 a win, -32000 a loss, 0 a
draw), or nulls when it goes on.
"""
import json
import sys

import pyffish

for line in sys.stdin:
    query = json.loads(line)
    fen, moves = query["fen"], query["moves"]
    answer = {"ply": None, "value": None}
    for ply in query["plies"]:
        played = moves[:ply]
        if not pyffish.legal_moves("xiangqi", fen, played):
            answer = {"ply": ply, "value": pyffish.game_result("xiangqi", fen, played)}
            break
        ended, value = pyffish.is_optional_game_end("xiangqi", fen, played)
        if ended:
            answer = {"ply": ply, "value": value}
            break
    print(json.dumps(answer), flush=True)
