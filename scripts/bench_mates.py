"""How soon a UCI engine's search finds the mates of an EPD suite, beside a reference
engine in the same run.

Each engine gets each position alone (a new process, so no table or history carries
over), single-threaded, pinned to one core, and `go depth 127` until its search first
reports a mate score for the side to move or the time limit passes. Per position it
prints the depth and the nodes of that first mate; at the end the geometric mean of the
nodes (a position not solved counts with the nodes searched by then, so the mean is a
lower bound when any is unsolved) and each engine's ratio to the first engine's.

An engine is NAME=COMMAND[,OPTION=VALUE...]: the options go as `setoption` lines. The
first command word `ucci` instead of `uci` (spelled NAME=ucci:COMMAND) speaks UCCI, the
dialect whose ranks are 0..9 as in our FENs and moves; Fairy-Stockfish takes it.

Usage: python bench_mates.py SUITE.epd --engine NAME=CMD[,OPT=V...] [--engine ...]
           [--seconds 5] [--core 1]
"""

import argparse
import math
import re
import select
import subprocess
import time


def parse_engine(text):
    name, _, rest = text.partition("=")
    command, *options = rest.split(",")
    protocol = "uci"
    if command.startswith("ucci:"):
        protocol, command = "ucci", command[len("ucci:"):]
    return name, protocol, command, [option.split("=", 1) for option in options]


def first_mate(engine, fen, seconds, core):
    """(depth, nodes, solved) of the first mate score for the side to move."""
    _, protocol, command, options = engine
    process = subprocess.Popen(
        ["taskset", "-c", str(core), command],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    lines = [protocol] + [f"setoption name {n} value {v}" for n, v in options]
    lines += [f"position fen {fen}", "go depth 127"]
    process.stdin.write("".join(line + "\n" for line in lines))
    process.stdin.flush()
    deadline = time.monotonic() + seconds
    depth, nodes, solved = 0, 0, False
    while not solved and time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.05)
        if not ready:
            continue
        line = process.stdout.readline()
        if not line or line.startswith("bestmove"):
            break
        if not line.startswith("info depth") or " score " not in line:
            continue
        depth = int(re.search(r" depth (\d+)", line)[1])
        nodes = int(re.search(r" nodes (\d+)", line)[1])
        mate = re.search(r" score mate (-?\d+)", line)
        solved = mate is not None and int(mate[1]) > 0
    try:
        process.stdin.write("stop\nquit\n")
        process.stdin.flush()
    except BrokenPipeError:
        pass
    process.wait()
    return depth, nodes, solved


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite")
    parser.add_argument("--engine", action="append", required=True, type=parse_engine)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--core", type=int, default=1)
    args = parser.parse_args()
    positions = []
    for line in open(args.suite):
        if line.strip() and not line.startswith("#"):
            fen, *operations = (part.strip() for part in line.split(";"))
            name = next((op[3:] for op in operations if op.startswith("id ")), fen)
            positions.append((name, fen))
    logs = {engine[0]: [] for engine in args.engine}
    unsolved = {engine[0]: 0 for engine in args.engine}
    for name, fen in positions:
        cells = []
        for engine in args.engine:
            depth, nodes, solved = first_mate(engine, fen, args.seconds, args.core)
            logs[engine[0]].append(math.log(max(nodes, 1)))
            unsolved[engine[0]] += not solved
            cells.append(f"{engine[0]} " + (f"d{depth} {nodes}" if solved else f"none by d{depth} {nodes}"))
        print(f"{name}: " + " | ".join(cells), flush=True)
    first = args.engine[0][0]
    mean = {key: math.exp(sum(values) / len(values)) for key, values in logs.items()}
    for key in logs:
        print(
            f"{key}: geometric mean {mean[key]:.0f} nodes to the first mate, "
            f"{len(positions) - unsolved[key]} of {len(positions)} found in {args.seconds:g} s, "
            f"ratio to {first} {mean[key] / mean[first]:.2f}x"
        )


if __name__ == "__main__":
    main()
