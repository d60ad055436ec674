# Sourced by the scripts: where builds and the reference tools live.
# Cargo's target directory stays outside the clone so that repeated runs (and CI on a
# fresh clone) build incrementally.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/xq-cluster/target}"
XQ_CACHE="${XQ_CACHE:-$HOME/.cache/xq-cluster}"
export XQ_PYTHON="${XQ_PYTHON:-$XQ_CACHE/venv/bin/python}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FAIRY_STOCKFISH=/usr/games/fairy-stockfish
# libtorch for the trainer (tch): the torch wheel in the venv, installed by scripts/setup.
# A user with libtorch elsewhere (a CUDA build, say) sets LIBTORCH before sourcing this.
# The venv is made from the system's python3, so its site-packages is named by that
# version; asked of python3 rather than globbed, since on a fresh machine the venv does
# not exist yet when this is sourced (the glob stayed unexpanded and the build failed).
XQ_PYTHON_VERSION="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
XQ_SITE_PACKAGES="$XQ_CACHE/venv/lib/python$XQ_PYTHON_VERSION/site-packages"
export LIBTORCH="${LIBTORCH:-$XQ_SITE_PACKAGES/torch}"
