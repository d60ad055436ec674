"""A synthetic UCI engine for SPSA's tests: its strength is a known function of two
spin options, First and Second, and is greatest at a hidden optimum (60, 80).

At every move it plays, with probability p, the capture that takes the most material
(any legal move when there is none) and otherwise a random legal move, where
p = max(0, 1 - d / 60) and d is the distance of (First, Second) from the optimum. It
reports the material balance after its move as its score, so that resign adjudication
ends a game once one side is clearly ahead. Moves come from pyffish (Fairy-Stockfish's
rules), with ranks 1..10 and FEN letters n and b.

Usage: synthetic_engine.py SEED
"""
import math
import random
import re
import sys

import pyffish

VARIANT = "xiangqi"
OPTIMUM = {"First": 60.0, "Second": 80.0}
VALUES = {"r": 900, "c": 450, "n": 400, "b": 200, "a": 200, "p": 100, "k": 0}

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
options = {"First": 100.0, "Second": 50.0}
fen, moves = pyffish.start_fen(VARIANT), []


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def board_of(position):
    """Square name to piece letter."""
    board = {}
    for row, text in enumerate(position.split()[0].split("/")):
        file = 0
        for char in text:
            if char.isdigit():
                file += int(char)
            else:
                board["%s%d" % ("abcdefghi"[file], 10 - row)] = char
                file += 1
    return board


def material(position, side):
    """The material balance from `side`'s view ('w' red, 'b' black)."""
    balance = 0
    for piece in board_of(position).values():
        value = VALUES[piece.lower()]
        balance += value if piece.isupper() == (side == "w") else -value
    return balance


def target(move):
    """The destination square of a UCI move such as h3h10."""
    return re.fullmatch(r"[a-i]\d+([a-i]\d+)", move).group(1)


def choose():
    legal = pyffish.legal_moves(VARIANT, fen, moves)
    distance = math.hypot(*(options[name] - OPTIMUM[name] for name in OPTIMUM))
    strength = max(0.0, 1.0 - distance / 60.0)
    if rng.random() < strength:
        board = board_of(pyffish.get_fen(VARIANT, fen, moves))
        return max(legal, key=lambda m: (VALUES[board.get(target(m), "k").lower()], rng.random()))
    return rng.choice(legal)


for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "uci":
        say("id name synthetic")
        for name, default in (("First", 100), ("Second", 50)):
            say("option name %s type spin default %d min 0 max 200" % (name, default))
        say("uciok")
    elif words[0] == "isready":
        say("readyok")
    elif words[0] == "setoption":
        text = " ".join(words[1:])
        name, _, value = text.removeprefix("name ").partition(" value ")
        if name in options:
            options[name] = float(value)
    elif words[0] == "position":
        rest = " ".join(words[1:])
        head, _, tail = rest.partition(" moves ")
        fen = pyffish.start_fen(VARIANT) if head.strip() == "startpos" else head.removeprefix("fen ").strip()
        moves = tail.split()
    elif words[0] == "go":
        move = choose()
        side = pyffish.get_fen(VARIANT, fen, moves).split()[1]
        after = pyffish.get_fen(VARIANT, fen, moves + [move])
        say("info depth 1 score cp %d" % material(after, side))
        say("bestmove " + move)
    elif words[0] == "quit":
        break
