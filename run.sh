#!/usr/bin/env bash
# One entry point for the suite. Each verb sets up its venv first (only when requirements change): the core
# (requirements.txt: the notebooks and the report on TensorFlow) for the verbs that run the suite, the test set
# (requirements-test.txt: the core, every extra and pytest) for `test` and `bench`. docs/install.md: which extra
# each feature needs.
#   ./run.sh smoke   the main job: a quick sweep of every notebook on this machine's device, then the report
#   ./run.sh test    the test suite (slow paper-size runs are skipped; ./run.sh test -m slow runs them; -n 2 runs
#                    it on two workers as CI does: docs/testing.md)
#   ./run.sh bench   every benchmark under benchmarks/, each printing its ratio to a same-run baseline
#   ./run.sh paper   the paper-size sweep (hours on a CPU; meant for GPU/TPU runtimes)
#   ./run.sh gpu-check  on a GPU machine, one table saying whether its GPU path measures right (minutes)
#   ./run.sh device-pack       the wheels a lent GPU machine lacks, into .device/ (docs/device.md)
#   ./run.sh on-device         on that machine, as one call: the pack installed, the device run, one zip
#   ./run.sh device-rehearsal  the device run rehearsed here on the CPU, in a venv of the machine's packages
#   ./run.sh setup [core|test|rehearsal]  only the set-up of a venv (.ci/run builds the later steps' ahead)
# COLABKIT_STACK=colab before any verb runs it under the Colab set instead (requirements-colab.txt and
# requirements-colab-test.txt: Colab's versions on Python 3.13, in .venv-colab; docs/colab.md); ./run.sh colab-check
# shows that installing colabkit as the Colab set-up cell does changes none of them, then runs the matmul, CNN and
# ParaDnn smoke and the report.
set -euo pipefail
cd "$(dirname "$0")"

case "${COLABKIT_STACK:-today}" in
  today) CORE=requirements.txt TESTS=requirements-test.txt CONSTRAINTS="" VENV=${COLABKIT_VENV:-.venv}
         PYTHONS="python3.11 python3" MINOR=11 ;;
  colab) CORE=requirements-colab.txt TESTS=requirements-colab-test.txt CONSTRAINTS=constraints-colab.txt
         VENV=${COLABKIT_VENV:-.venv-colab} PYTHONS="python3.13 $HOME/.pyenv/versions/3.13.0/bin/python" MINOR=13 ;;
  *) echo "run.sh: COLABKIT_STACK is 'today' (requirements.txt) or 'colab' (requirements-colab.txt)" >&2; exit 2 ;;
esac
PY="$VENV/bin/python"
# uv installs the pinned sets (about 35 s for the core from an empty cache, where pip took 120 s); pip itself
# stays in every venv, and installs colabkit where an installation is what is checked (colab-check).
UV_VERSION=0.13.9
# uv writes no bytecode at install (pip does, at twice the install time), and where PYTHONDONTWRITEBYTECODE is set
# Python never writes it either: every kernel then compiles TensorFlow's and Keras's source again, about 10 s of
# each run's start (measured: a fresh kernel's `import tensorflow` 14.7 s, 7.6 s from bytecode). Under run.sh
# Python writes the bytecode of what it imports, once, into the venvs (and colabkit's __pycache__, ignored by git).
unset PYTHONDONTWRITEBYTECODE

find_python() {
  # The Python 3.$MINOR to build the venv with: $PYTHON where set (one line and no venv where it is not such a
  # Python: never passed over unsaid), else the first of $PYTHONS. Callers run "$(find_python)" -m venv, in a
  # subshell an exit cannot end the script from: on failure it prints `false`, which fails the caller's command
  # (exit 1 under set -e) after the line, rather than leaving "" to run as a command.
  local candidate said why
  if [ -n "${PYTHON:-}" ]; then
    said=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>&1 | head -n 1) || true
    if [ "$said" = "3.$MINOR" ]; then echo "$PYTHON"; return; fi
    if ! command -v "$PYTHON" >/dev/null 2>&1; then why="no such command"
    elif [[ "$said" =~ ^[0-9]+\.[0-9]+$ ]]; then why="it is Python $said"
    else why="it does not run as Python (${said:-no output})"; fi
    echo "run.sh: PYTHON=$PYTHON: $why; the ${COLABKIT_STACK:-today} set needs Python 3.$MINOR (or leave PYTHON unset)" >&2
    echo false; return
  fi
  for candidate in $PYTHONS; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != (3, $MINOR))" 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  echo "run.sh: no Python 3.$MINOR found for the ${COLABKIT_STACK:-today} set (set PYTHON=/path/to/python3.$MINOR)" >&2
  echo false
}

setup() {
  # $1: core or test (the test set holds the core); $2: an optional extra of colabkit besides (cuda: CUDA's wheels
  # and NVML). The stamp holds the hash of the requirement files, then what is installed: changed requirements set
  # up again with everything installed before; a verb never drops what an earlier one installed.
  local wanted_set=$1 extra=${2:-} stamp="$VENV/.colabkit-installed" wanted installed="" have="" started=$SECONDS
  wanted=$(cat $CORE $TESTS $CONSTRAINTS pyproject.toml setup.py | sha256sum | cut -d' ' -f1)
  if [ -x "$PY" ] && [ -f "$stamp" ]; then
    read -r installed have < "$stamp" || true
    [ "$installed" = "$wanted" ] || have=$(echo " $have " | sed 's/ core / /; s/ test / /')  # sets: again
    if [[ " $have " == *" $wanted_set "* || ( $wanted_set == core && " $have " == *" test "* ) ]] &&
       { [ -z "$extra" ] || [[ " $have " == *" $extra "* ]]; }; then
      return
    fi
  fi
  have=$(echo "$have $wanted_set $extra" | xargs -n1 | sort -u | xargs)
  [[ " $have " == *" test "* ]] && have=$(echo " $have " | sed 's/ core / /' | xargs)
  local files="-r $CORE" extras package=.
  [[ " $have " == *" test "* ]] && files="$files -r $TESTS"
  extras=$(echo " $have " | sed 's/ core / /; s/ test / /' | xargs)
  [ -z "$extras" ] || package=".[${extras// /,}]"
  echo "run.sh: setting up $VENV: ${files//-r /} + colabkit${extras:+ [$extras]} (first run, requirements changed," \
       "or more to install)" >&2
  [ -x "$PY" ] || "$(find_python)" -m venv "$VENV"
  [ -x "$VENV/bin/uv" ] || "$PY" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
  # uv reads no pip.conf: the machine's wheel folder (find-links: PyTorch's CPU build here) is handed on
  UV_FIND_LINKS=${UV_FIND_LINKS:-${PIP_FIND_LINKS:-$("$PY" -m pip config get global.find-links 2>/dev/null || true)}} \
    "$VENV/bin/uv" pip install --quiet --python "$PY" $files ${CONSTRAINTS:+-c $CONSTRAINTS} -e "$package"
  echo "$wanted $have" > "$stamp"
  echo "run.sh: $VENV ready in $((SECONDS - started)) s ($(du -sh "$VENV" | cut -f1))" >&2
}

rehearsal_venv() {
  # Sets $venv: the rehearsal's Python 3.12 venv of the device image's packages (device/image.txt's rehearsal
  # column), built once per version of that file (needs .venv's uv: setup core first).
  local home=${COLABKIT_REHEARSAL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/colabkit/device-rehearsal}
  venv="$home/venv-$(sha256sum device/image.txt | cut -c1-12)"
  [ -x "$venv/bin/python" ] && return
  PYTHONS="python3.12 $HOME/.pyenv/versions/3.12.1/bin/python $HOME/.pyenv/versions/3.12.3/bin/python" MINOR=12
  rm -rf "$venv.part" && "$(find_python)" -m venv "$venv.part"
  "$PY" -c "import sys; sys.path.insert(0, 'tools'); from device_lists import *; print(*rehearsal_requirements(read_image(IMAGE_LIST)), sep='\n')" \
    > "$venv.part/image-requirements.txt"
  "$VENV/bin/uv" pip install --quiet --python "$venv.part/bin/python" --no-deps -r "$venv.part/image-requirements.txt"
  "$venv.part/bin/python" -m pip check  # the image's packages alone hold together
  mv "$venv.part" "$venv"  # the venv's scripts name $venv.part: only its python is called by path
}

verb=${1:-help}
[ $# -gt 0 ] && shift
case "$verb" in
  smoke|paper)
    setup core
    status=0
    "$PY" -m colabkit sweep parameters/*.yaml --preset "$verb" --out "outputs/$verb" "$@" || status=$?
    [ "$status" -eq 2 ] && exit 2  # the grids were refused: nothing ran, nothing to report
    "$PY" -m colabkit report "outputs/$verb" --out "outputs/$verb/report" || status=$?
    exit $status ;;
  test)
    setup test
    exec "$PY" -m pytest "$@" ;;
  setup)
    # only the set-up: core (the default), test, or rehearsal (the device rehearsal's venv, after the core)
    case "${1:-core}" in
      core|test) setup "${1:-core}" ;;
      rehearsal) setup core; rehearsal_venv; echo "run.sh: the rehearsal's venv: $venv" >&2 ;;
      *) echo "run.sh setup: core, test or rehearsal" >&2; exit 2 ;;
    esac ;;
  bench)
    setup test
    status=0
    for benchmark in benchmarks/[!_]*.py; do
      echo "== $benchmark"
      "$PY" "$benchmark" "$@" || status=1
    done
    exit $status ;;
  colab-check)
    # A fresh Python 3.13 venv with Colab's own packages only (both Colab requirement files above their "Not in
    # Colab's image" lines, at Colab's versions; uv installs them, as fast as the image is there already), then
    # colabkit installed as the Colab set-up cell installs it (a plain pip install, no constraints): no Colab version
    # may change; then the smoke of every notebook but the weather GRU's (.ci/run: each combination once) and the
    # report. The weather GRU's offline data comes with pvlib, which Colab's image lacks (in Colab it downloads the
    # real archive): with no network here it could only fail.
    VENV=.venv-colab-check PY=.venv-colab-check/bin/python PYTHONS="python3.13 $HOME/.pyenv/versions/3.13.0/bin/python"
    MINOR=13
    rm -rf "$VENV" && "$(find_python)" -m venv "$VENV"
    for listed in requirements-colab.txt requirements-colab-test.txt; do
      sed "/^# Not in Colab's image/,\$d" "$listed" | grep -v '^-r '
    done > "$VENV/colab-only.txt"
    "$PY" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
    "$VENV/bin/uv" pip install --quiet --python "$PY" -r "$VENV/colab-only.txt" -c constraints-colab.txt
    "$PY" -m pip freeze --all > "$VENV/before.txt"
    "$PY" -m pip install --quiet --disable-pip-version-check .
    "$PY" -m pip freeze --all > "$VENV/after.txt"
    "$PY" - "$VENV/before.txt" "$VENV/after.txt" <<'COMPARE'
import re, sys
before, after = ({m[1].lower(): m[2] for m in re.finditer(r"^([^=\s]+)==(\S+)$", open(p).read(), re.M)} for p in sys.argv[1:])
changed = [f"{name} {version} -> {after.get(name, 'removed')}" for name, version in before.items() if after.get(name) != version]
print("colab-check: installing colabkit changed " + (", ".join(changed) if changed else f"none of the {len(before)} packages"))
sys.exit(1 if changed else 0)
COMPARE
    out=$(mktemp -d)
    (cd "$out" && "$OLDPWD/$PY" -m colabkit sweep "$OLDPWD"/parameters/{matmul_tflops,cnn_mnist,dblstm_har,paradnn}.yaml \
       --preset smoke --out "$out/smoke" "$@" && "$OLDPWD/$PY" -m colabkit report "$out/smoke" --out "$out/smoke/report")
    echo "colab-check: the smoke and its report are in $out/smoke" ;;
  device-pack)
    # Here, with a package registry: the wheels the lent GPU machines' image lacks (device/pack.txt, checked
    # against device/image.txt), colabkit's own wheel and a manifest, into .device/ (docs/device.md).
    setup core
    exec "$PY" tools/device_pack.py --out .device "$@" ;;
  on-device)
    # On a lent GPU machine, as one device call (docs/device.md): no venv and no registry. First the pre-flight
    # (seconds, nothing installed or run when it refuses: $OUT writable, the pack's sha256s, the image's
    # versions); then the image's own python3 (3.12) gets the pack with pip --no-index into a folder of its own,
    # a kernel is registered there, then the timed run: gpu-check, every device preset, the report, one zip
    # (into $OUT, or the run's folder when $OUT is unset) and a summary.
    started=$(date +%s.%N)
    device_python=${DEVICE_PYTHON:-python3}
    "$device_python" -c "import sys; sys.exit(sys.version_info[:2] != (3, 12))" 2>/dev/null ||
      { echo "run.sh on-device: $device_python is not Python 3.12 (the device image's; set DEVICE_PYTHON)" >&2; exit 2; }
    out="${COLABKIT_DEVICE_OUT:-outputs/on-device}/$(date -u +%Y%m%dT%H%M%SZ)"
    # the checkout's colabkit (standard library only): the pack is not installed yet
    "$device_python" -m colabkit.ondevice preflight --pack .device --out "$out" || exit $?
    # One temporary folder, removed however the run ends: the pack installed (site/) and the run's TMPDIR (tmp/:
    # what papermill, Jupyter, JAX or PyTorch leave in the temporary directory)
    work=$(mktemp -d "${TMPDIR:-/tmp}/colabkit-device.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM
    site="$work/site"
    mkdir "$site" "$work/tmp"
    "$device_python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile \
      --no-cache-dir --target "$site" .device/wheels/*.whl || { echo "run.sh on-device: the pack did not install" >&2; exit 1; }
    # PYTHONSAFEPATH: every process imports colabkit as the pack installed it, not from the working folder
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" JUPYTER_PATH="$site/share/jupyter" PATH="$site/bin:$PATH" \
      PYTHONSAFEPATH=1 TMPDIR="$work/tmp"
    "$device_python" -m ipykernel install --prefix "$site" --name python3 >/dev/null  # the kernel papermill starts
    echo "stage install: ok, $(awk "BEGIN { printf \"%.0f\", $(date +%s.%N) - $started }") s ($site)"
    status=0
    "$device_python" -m colabkit.ondevice run --pack .device --out "$out" --zip-to "${OUT:-$out}" \
      --started "$started" "$@" || status=$?
    exit $status ;;
  device-rehearsal)
    # The device run rehearsed here, on the CPU (docs/device.md): a Python 3.12 venv holding only the image's
    # packages (device/image.txt's rehearsal column, PyTorch's CUDA build among them: about 4.6 GB), cached by that
    # file's hash; the pack built and installed with no registry; then `on-device` itself.
    setup core
    started=$SECONDS
    "$PY" tools/device_pack.py --out .device >/dev/null
    rehearsal_venv
    echo "device-rehearsal: venv $venv and the pack ready after $((SECONDS - started)) s"
    status=0
    env PATH="$venv/bin:$PATH" DEVICE_PYTHON="$venv/bin/python" PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 \
      PIP_INDEX_URL=http://127.0.0.1:9/unreachable COLABKIT_DEVICE_OUT="${COLABKIT_DEVICE_OUT:-outputs/device-rehearsal}" OUT= \
      ./run.sh on-device "$@" || status=$?
    echo "device-rehearsal: $((SECONDS - started)) s in all (exit $status)"
    exit $status ;;
  gpu-check)
    # CUDA's wheels (gigabytes) only where there is a GPU to use them; elsewhere the check says so
    if command -v nvidia-smi >/dev/null 2>&1; then setup core cuda; else setup core; fi
    exec "$PY" -m colabkit gpu-check "$@" ;;
  *)
    awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'  # the comment block above
    [ "$verb" = help ] || exit 2 ;;
esac
