# Sourced first by the workload scripts (kernel_venv.sh, install_wheel.sh): the script re-runs
# itself in a new network namespace, unless its target allows the network.
if [[ -z "${ROCM_KERNEL_IN_NAMESPACE:-}" && "${ROCM_KERNEL_NETWORK:-none}" == none ]]; then
  export ROCM_KERNEL_IN_NAMESPACE=1
  unshare_args=(--net)
  [[ "$(id -u)" -eq 0 ]] || unshare_args+=(--map-root-user)
  exec unshare "${unshare_args[@]}" bash "$0" "$@"
fi
