"""Prints Fairy-Stockfish's WXF notation for moves, for the differential test.

Each input line: FEN, a tab, a move in Fairy-Stockfish's coordinates (ranks 1..10).
Each output line: the move in WXF notation, as pyffish writes it.
"""
import sys

import pyffish

for line in sys.stdin:
    fen, move = line.rstrip("\n").split("\t")
    print(pyffish.get_san("xiangqi", fen, move, False, pyffish.NOTATION_XIANGQI_WXF))
