#!/usr/bin/env bash
# One entry point for the suite. Each verb sets up .venv first (only when requirements change).
#   ./run.sh smoke   the main job: a quick sweep of every notebook on this machine's device, then the report
#   ./run.sh test    the test suite (slow paper-size runs are skipped; ./run.sh test -m slow runs them)
#   ./run.sh bench   every benchmark under benchmarks/, each printing its ratio to a same-run baseline
#   ./run.sh paper   the paper-size sweep (hours on a CPU; meant for GPU/TPU runtimes)
#   ./run.sh gpu-check  on a GPU machine, one table saying whether its GPU path measures right (minutes)
set -euo pipefail
cd "$(dirname "$0")"

VENV=${COLABKIT_VENV:-.venv}
PY="$VENV/bin/python"

find_python() {
  for candidate in "${PYTHON:-}" python3.11 python3; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))'; then
      echo "$candidate"; return
    fi
  done
  echo "run.sh: no Python 3.11-3.13 found (set PYTHON=/path/to/python3.11)" >&2
  exit 1
}

setup() {
  # $1: an optional extra of colabkit to install too (cuda: CUDA's wheels and nvidia-ml-py). The stamp holds
  # the hash of the requirements, then every extra installed with them: changed requirements or a new extra set
  # up again, with every extra installed before (a verb without an extra never drops one).
  local extra=${1:-} stamp="$VENV/.colabkit-installed" wanted installed="" extras=""
  wanted=$(cat requirements.txt pyproject.toml setup.py | sha256sum | cut -d' ' -f1)
  if [ -x "$PY" ] && [ -f "$stamp" ]; then
    read -r installed extras < "$stamp" || true
    if [ "$installed" = "$wanted" ] && { [ -z "$extra" ] || [[ " $extras " == *" $extra "* ]]; }; then
      return
    fi
  fi
  extras=$(echo "$extras $extra" | xargs)
  echo "run.sh: setting up $VENV (first run, requirements changed, or a new extra: ${extra:-none})" >&2
  [ -x "$PY" ] || "$(find_python)" -m venv "$VENV"
  local package=.
  [ -z "$extras" ] || package=".[${extras// /,}]"
  "$PY" -m pip install --quiet --disable-pip-version-check -r requirements.txt -e "$package"
  echo "$wanted $extras" > "$stamp"
}

verb=${1:-help}
[ $# -gt 0 ] && shift
case "$verb" in
  smoke|paper)
    setup
    status=0
    "$PY" -m colabkit sweep parameters/*.yaml --preset "$verb" --out "outputs/$verb" "$@" || status=$?
    [ "$status" -eq 2 ] && exit 2  # the grids were refused: nothing ran, nothing to report
    "$PY" -m colabkit report "outputs/$verb" --out "outputs/$verb/report" || status=$?
    exit $status ;;
  test)
    setup
    exec "$PY" -m pytest "$@" ;;
  bench)
    setup
    status=0
    for benchmark in benchmarks/[!_]*.py; do
      echo "== $benchmark"
      "$PY" "$benchmark" "$@" || status=1
    done
    exit $status ;;
  gpu-check)
    # CUDA's wheels (gigabytes) only where there is a GPU to use them; elsewhere the check says so
    if command -v nvidia-smi >/dev/null 2>&1; then setup cuda; else setup; fi
    exec "$PY" -m colabkit gpu-check "$@" ;;
  *)
    awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'  # the comment block above
    [ "$verb" = help ] || exit 2 ;;
esac
