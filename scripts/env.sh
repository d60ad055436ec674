# Sourced by the scripts: where builds and the reference tools live.
# Cargo's target directory stays outside the clone so that repeated runs (and CI on a
# fresh clone) build incrementally.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/xq-cluster/target}"
XQ_CACHE="${XQ_CACHE:-$HOME/.cache/xq-cluster}"
export XQ_PYTHON="${XQ_PYTHON:-$XQ_CACHE/venv/bin/python}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FAIRY_STOCKFISH=/usr/games/fairy-stockfish
