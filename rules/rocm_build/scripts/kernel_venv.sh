# Sourced first by kernel_test.sh and choices_test.sh: the sandbox both run their workload in.
# No network: the script re-runs itself in a new network namespace (unless the target allows
# the network: no_network.sh). Nothing of the user's: Triton's cache and Python's home are in
# the sandbox. Then a venv of exactly the wheels under site/, and the upstream's tree (if any) in
# src/ on PYTHONPATH. Paths derive from $PWD at run time, never the process's key.

source "$(dirname "$0")/no_network.sh"

top="$PWD"
export HOME="$top/.home" TRITON_CACHE_DIR="$top/.triton" PYTHONNOUSERSITE=1
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$HOME" "$TRITON_CACHE_DIR"

start=$SECONDS
# An empty venv whose site-packages adds each installed wheel under site/ (each installed once,
# by content, and linked in: workloads/installed.py) as a site directory, so their own .pth
# files run as in a venv they were installed into.
"$ROCM_KERNEL_PYTHON" -m venv --without-pip "$top/.venv"
installed=()
[[ -d site ]] && for dir in site/*; do installed+=("$top/$dir"); done
"$top/.venv/bin/python" - "${installed[@]}" <<'PY'
import sys, sysconfig
with open(f"{sysconfig.get_path('purelib')}/rocm_workload_wheels.pth", "w") as pth:
    pth.write("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in sys.argv[1:]) + "\n")
PY
echo "== venv: ${#installed[@]} wheel(s), each installed once (site/), in $((SECONDS - start)) s"

[[ -d src ]] && export PYTHONPATH="$top/src"
targets=()
for target in $ROCM_KERNEL_TARGETS; do targets+=(--target "$target"); done
