# Runs one upstream_choices_test in its sandbox (kernel_venv.sh: no network, a venv of exactly
# its wheels, the upstream's tree with our patches on PYTHONPATH): the workload under the
# compile-only driver for each gpu target (upstream_choices.py), which judges the choices
# against expected.json.
set -euo pipefail
source "$(dirname "$0")/kernel_venv.sh"

exec "$top/.venv/bin/python" __rocm_build/upstream_choices.py --workload "$ROCM_KERNEL_WORKLOAD" \
  "${targets[@]}" --expected expected.json --report choices.json
