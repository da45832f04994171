# Runs the pinned bootstrap pip (bootstrap/pip-*.whl) with the build Python, in a throwaway
# venv of the sandbox, so neither the host's pip nor its configuration takes part.
# Usage: run_pip.sh PYTHON PIP-ARGS...
set -euo pipefail
python="$1"
shift
"$python" -m venv --without-pip .pip-venv
pip_wheel=(bootstrap/pip-*.whl)
exec .pip-venv/bin/python "${pip_wheel[0]}/pip" --disable-pip-version-check --no-input "$@"
