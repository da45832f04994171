# Installs one wheel of a workload test's venv into installed/, as pip lays it out
# (workloads/installed.py): once per wheel and Python, then linked into every test that uses it.
# Nothing of the sandbox's path stays in what it writes: console scripts (installed/bin/, their
# first line names this sandbox's Python) and direct_url.json (the wheel's path here) go, so the
# same wheel installs to the same bytes on every machine.
set -euo pipefail
source "$(dirname "$0")/no_network.sh"

top="$PWD"
export HOME="$top/.home" PIP_CONFIG_FILE=/dev/null PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME"
# The pinned pip, unpacked once (pip-tree/, workloads/installed.py): no venv to make for it
# (ensurepip's took 3 s a wheel, and a set has up to 74).
PYTHONPATH="$top/pip-tree" "$ROCM_KERNEL_PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --disable-pip-version-check --root-user-action=ignore --target "$top/installed" "$1"
rm -rf "$top/installed/bin"
rm -f "$top"/installed/*.dist-info/direct_url.json
