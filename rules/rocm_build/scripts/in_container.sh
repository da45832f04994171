# Runs a build command in a fresh container of a build image, removed when it ends: no
# network, the image read-only with a private /tmp, the hostname fixed, and nothing of this
# machine but the sandbox (at the fixed path) and the named caches the build declares.
# Usage: in_container.sh ENGINE IMAGE_ID COMMAND...
# $ROCM_BUILD_CONTAINER_CACHES: the sandbox's named-cache links to mount, by name.
# $ROCM_BUILD_CONTAINER_ENV: the variables passed into the container, by name.
set -euo pipefail
engine="$1"; image="$2"; shift 2
fixed=/mnt/rocm-build
# SELinux hosts (Fedora) would deny the container its mounts; relabelling them instead would
# change the labels of this machine's caches, so the container runs unlabelled.
args=(run --rm --init --network=none --read-only --tmpfs /tmp --hostname rocm-build
  --security-opt label=disable --workdir "$fixed" -v "$PWD:$fixed")
for cache in $ROCM_BUILD_CONTAINER_CACHES; do
  # Pants links the cache into the sandbox; the container cannot follow a link to this
  # machine's path, so the cache itself is mounted where the link was.
  real="$(readlink -f "$cache")"
  rm "$cache" && mkdir "$cache"
  args+=(-v "$real:$fixed/$cache")
done
# ccache's remote storage is relayed from this side (ccache_remote.py): no network inside.
if [[ -s .ccache-remote/storage.json ]]; then
  python3 __rocm_build/ccache_remote.py forward .ccache-remote .ccache-forward $$
fi
for var in $ROCM_BUILD_CONTAINER_ENV; do args+=(-e "$var"); done
exec "$engine" "${args[@]}" "$image" "$@"
