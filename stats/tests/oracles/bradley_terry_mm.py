"""An independent rating computation for the ratings tests: Hunter's minorization-
maximization algorithm for the Bradley-Terry model (2004), a draw counting as half a
win and half a loss, in plain Python.

Input on stdin: the number of engines, then one game a line, "first second score".
Output: each engine's Elo relative to engine 0, one a line.
"""
import math
import sys

lines = sys.stdin.read().split("\n")
engines = int(lines[0])
wins = [0.0] * engines
games = [[0.0] * engines for _ in range(engines)]
for line in lines[1:]:
    if not line.strip():
        continue
    first, second, score = line.split()
    first, second, score = int(first), int(second), float(score)
    wins[first] += score
    wins[second] += 1.0 - score
    games[first][second] += 1
    games[second][first] += 1

strength = [1.0] * engines
for _ in range(100000):
    updated = []
    for i in range(engines):
        denominator = sum(games[i][j] / (strength[i] + strength[j]) for j in range(engines) if j != i)
        updated.append(wins[i] / denominator)
    scale = updated[0]
    updated = [s / scale for s in updated]
    change = max(abs(math.log(a / b)) for a, b in zip(updated, strength))
    strength = updated
    if change < 1e-13:
        break
for s in strength:
    print(400.0 * math.log10(s))
