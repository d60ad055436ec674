"""A UCI engine driven line by line over its pipes, for the scripts that talk to one
(make_book.py, bench_hash.py)."""

import subprocess
import sys


class Engine:
    def __init__(self, path):
        self.path = path
        self.process = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.send("uci")
        self.until(lambda line: line == "uciok")

    def send(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def until(self, done):
        """The engine's lines up to and including the first for which `done` holds."""
        lines = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                sys.exit(f"{self.path} ended unexpectedly")
            line = line.strip()
            lines.append(line)
            if done(line):
                return lines

    def quit(self):
        self.send("quit")
        self.process.wait()
