# Runs one triton_kernel_test in its sandbox: a venv of exactly the wheels in wheels/, the
# upstream's tree (if any) in src/ on PYTHONPATH, the workload under the compile-only driver
# (triton_kernels.py) for each gpu target, then the verdict (kernel_verdict.py) against the
# target's expected failures. No network: re-run in a new network namespace first. Paths are
# derived from $PWD at run time: no machine path is in the process's key.
set -euo pipefail

if [[ -z "${ROCM_KERNEL_IN_NAMESPACE:-}" && "${ROCM_KERNEL_NETWORK:-none}" == none ]]; then
  export ROCM_KERNEL_IN_NAMESPACE=1
  unshare_args=(--net)
  [[ "$(id -u)" -eq 0 ]] || unshare_args+=(--map-root-user)
  exec unshare "${unshare_args[@]}" bash "$0" "$@"
fi

top="$PWD"
# Nothing of the user's: Triton's cache, pip's and Python's home are in the sandbox.
export HOME="$top/.home" TRITON_CACHE_DIR="$top/.triton" PIP_CONFIG_FILE=/dev/null PYTHONNOUSERSITE=1
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME" "$TRITON_CACHE_DIR"

start=$SECONDS
"$ROCM_KERNEL_PYTHON" -m venv "$top/.venv"
"$top/.venv/bin/python" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check wheels/*.whl
echo "== venv: $(ls wheels | wc -l) wheel(s) in $((SECONDS - start)) s"

[[ -d src ]] && export PYTHONPATH="$top/src"
targets=()
for target in $ROCM_KERNEL_TARGETS; do targets+=(--target "$target"); done
"$top/.venv/bin/python" __rocm_build/triton_kernels.py --workload "$ROCM_KERNEL_WORKLOAD" "${targets[@]}" --report report.json
exec "$top/.venv/bin/python" __rocm_build/kernel_verdict.py report.json expected.json
