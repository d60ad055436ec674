"""Prints Fairy-Stockfish's repetition ruling for games, for the differential test.

Each input line: FEN, a tab, the moves in Fairy-Stockfish's coordinates (ranks 1..10),
separated by spaces. Each output line: whether the game has ended by its repetition
rules, and the value for the side to move (32000 a win, -32000 a loss, 0 a draw).
"""
import sys

import pyffish

for line in sys.stdin:
    fen, moves = line.rstrip("\n").split("\t")
    ended, value = pyffish.is_optional_game_end("xiangqi", fen, moves.split())
    print(ended, value)
