# Runs one upstream_choices_test in its sandbox: a venv of exactly the wheels in wheels/, the
# upstream's tree in src/ (with our patches: its upstream_archive or upstream_repo applied them),
# on PYTHONPATH, then the workload under the compile-only driver for each gpu target
# (upstream_choices.py), which judges the choices against expected.json. No network: re-run in
# a new network namespace first. Paths derive from $PWD at run time, never the process's key.
set -euo pipefail

if [[ -z "${ROCM_KERNEL_IN_NAMESPACE:-}" && "${ROCM_KERNEL_NETWORK:-none}" == none ]]; then
  export ROCM_KERNEL_IN_NAMESPACE=1
  unshare_args=(--net)
  [[ "$(id -u)" -eq 0 ]] || unshare_args+=(--map-root-user)
  exec unshare "${unshare_args[@]}" bash "$0" "$@"
fi

top="$PWD"
export HOME="$top/.home" TRITON_CACHE_DIR="$top/.triton" PIP_CONFIG_FILE=/dev/null PYTHONNOUSERSITE=1
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME" "$TRITON_CACHE_DIR"

"$ROCM_KERNEL_PYTHON" -m venv "$top/.venv"
"$top/.venv/bin/python" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check wheels/*.whl

export PYTHONPATH="$top/src"
targets=()
for target in $ROCM_KERNEL_TARGETS; do targets+=(--target "$target"); done
exec "$top/.venv/bin/python" __rocm_build/upstream_choices.py --workload "$ROCM_KERNEL_WORKLOAD" \
  "${targets[@]}" --expected expected.json --report choices.json
