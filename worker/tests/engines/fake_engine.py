"""A scripted UCI engine that misbehaves in one chosen way, for the worker's tests.

Usage: fake_engine.py MODE, where MODE is crash, hang, late, illegal, noready, flood,
longline or garbage. Until asked to search it behaves; at `go` it misbehaves (noready already at
`isready`); late answers 1.6 s after `go`, from a search thread, as a real engine that
overruns its time does, and answers `isready` meanwhile. MODE-later (crash-later, ...)
first plays one legal move of the start position's (a cannon to the centre) and
misbehaves from its second `go` of each game on: an engine that fails in the middle of a game,
which loses it, where one that fails before its first move fails the pair.

Two more modes repeat themselves, for the arbiter's warnings: perpetual and stubborn
take back their own previous move at every turn (f0e0 first), a shuttle that makes a
perpetual check of a rook in the right position. Perpetual obeys a ban (UCI `go ...
searchmoves`: it plays the first move listed; UCCI `banmoves`: it steps its king d0d1);
stubborn repeats anyway. Either speaks UCCI when the first command is `ucci`.
"""
import sys
import threading

mode = sys.argv[1]
later = mode.endswith("-later")
mode = mode.removesuffix("-later")
searched = 0
moves, banned = [], []

def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    command = line.split()
    if not command:
        continue
    if command[0] in ("uci", "ucci"):
        say("id name fake-" + mode)
        say(command[0] + "ok")
    elif command[0] in ("ucinewgame", "uccinewgame"):
        searched = 0
    elif command[0] == "position":
        moves = command[command.index("moves") + 1:] if "moves" in command else []
    elif command[0] == "banmoves":
        banned = command[1:]
    elif command[0] == "go" and mode in ("perpetual", "stubborn"):
        # Its first move: Red's rook to the king's file, or Black's king a step down
        # (from the checks position, where either is legal).
        first = "f0e0" if len(moves) % 2 == 0 else "e9e8"
        wanted = moves[-2][2:] + moves[-2][:2] if len(moves) >= 2 else first
        allowed = command[command.index("searchmoves") + 1:] if "searchmoves" in command else None
        if mode == "perpetual" and allowed is not None and wanted not in allowed:
            wanted = allowed[0]
        elif mode == "perpetual" and wanted in banned:
            wanted = "d0d1"
        banned = []
        say("bestmove " + wanted)
    elif command[0] == "isready":
        if mode != "noready":
            say("readyok")
    elif command[0] == "go" and later and searched == 0:
        searched += 1
        say("bestmove " + ("h2e2" if len(moves) % 2 == 0 else "h7e7"))
    elif command[0] == "go":
        if mode == "crash":
            sys.stderr.write("fake engine: segmentation fault (simulated)\n")
            sys.exit(139)
        elif mode == "hang":
            continue
        elif mode == "late":
            threading.Timer(1.6, say, ["bestmove h2e2"]).start()
        elif mode == "illegal":
            say("bestmove e0e9")
        elif mode == "garbage":
            say("bestmove")
        elif mode == "flood":
            while True:
                say("info string flooding")
        elif mode == "longline":
            # 100 MB without a newline, then silence: a reader that keeps it all grows
            # without bound.
            chunk = "x" * (1 << 20)
            try:
                for _ in range(100):
                    sys.stdout.write(chunk)
                sys.stdout.flush()
            except BrokenPipeError:
                sys.exit(0)
            threading.Event().wait()
    elif command[0] == "quit":
        break
