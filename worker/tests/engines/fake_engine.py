"""A scripted UCI engine that misbehaves in one chosen way, for the worker's tests.

Usage: fake_engine.py MODE, where MODE is crash, hang, late, illegal, noready, flood
or garbage. Until asked to search it behaves; at `go` it misbehaves (noready already at
`isready`); late answers 1.6 s after `go`, from a search thread, as a real engine that
overruns its time does, and answers `isready` meanwhile.
"""
import sys
import threading

mode = sys.argv[1]

def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    command = line.split()
    if not command:
        continue
    if command[0] == "uci":
        say("id name fake-" + mode)
        say("uciok")
    elif command[0] == "isready":
        if mode != "noready":
            say("readyok")
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
    elif command[0] == "quit":
        break
