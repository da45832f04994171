# Sourced first by kernel_test.sh and choices_test.sh: the sandbox both run their workload in.
# No network: the script re-runs itself in a new network namespace (unless the target allows
# the network). Nothing of the user's: Triton's cache, pip's and Python's home are in the
# sandbox. Then a venv of exactly the wheels in wheels/, and the upstream's tree (if any) in
# src/ on PYTHONPATH. Paths derive from $PWD at run time, never the process's key.

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

start=$SECONDS
"$ROCM_KERNEL_PYTHON" -m venv "$top/.venv"
"$top/.venv/bin/python" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check wheels/*.whl
echo "== venv: $(ls wheels | wc -l) wheel(s) in $((SECONDS - start)) s"

[[ -d src ]] && export PYTHONPATH="$top/src"
targets=()
for target in $ROCM_KERNEL_TARGETS; do targets+=(--target "$target"); done
