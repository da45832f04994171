# Runs one triton_kernel_test in its sandbox (kernel_venv.sh: no network, a venv of exactly its
# wheels, the upstream's tree on PYTHONPATH): the workload under the compile-only driver
# (triton_kernels.py) for each gpu target, then the verdict (kernel_verdict.py) against the
# target's expected failures. Its argument: how many processes the cases may use (Pants' share
# of the cores, sandbox.py's CONCURRENCY).
set -euo pipefail
source "$(dirname "$0")/kernel_venv.sh"

"$top/.venv/bin/python" __rocm_build/triton_kernels.py --workload "$ROCM_KERNEL_WORKLOAD" "${targets[@]}" --report report.json \
  --under-test expected.json --jobs "${1:-1}"
exec "$top/.venv/bin/python" __rocm_build/kernel_verdict.py report.json expected.json
