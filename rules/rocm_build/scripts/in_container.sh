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
# The pinned sccache (build_process.py) is a link into this machine's store: mounted read-only.
if [[ -L .sccache-bin ]]; then
  real="$(readlink -f .sccache-bin)"
  rm .sccache-bin && mkdir .sccache-bin
  args+=(-v "$real:$fixed/.sccache-bin:ro")
fi
# The source tree as the fetched pack and the patched files (build_wheel.sh): the image need
# not have git, and the pack is a link into this machine's store, so the tree is checked out
# here, with the git the rules use, into the sandbox the container gets.
if [[ -e .source-pack && ! -e tree ]]; then
  started="$SECONDS"
  GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
    python3 __rocm_build/source_pack.py checkout .source-pack tree
  cp -R .tree-changes/. tree/ && chmod -R u+w tree
  echo "the fetched source checked out and the patched files copied before the container started, in $((SECONDS - started)) s" > .tree-note
fi
# ccache's remote storage is relayed from this side (ccache_remote.py): no network inside.
if [[ -s .ccache-remote/storage.json ]]; then
  python3 __rocm_build/ccache_remote.py forward .ccache-remote .ccache-forward $$
fi
# The kept build directory (kept_build_dir.py): taken here, on the tree just written, and only
# its entry mounted where the build writes; kept when the container's build succeeded. The
# build inside reads what happened from .kept-note.
kept_entry=""
if [[ -n "${ROCM_BUILD_KEPT_KEY:-}" && -z "${ROCM_BUILD_PREFLIGHT:-}" && -d .build-dirs ]]; then
  source __rocm_build/machine_caches.sh
  pack=()
  [[ -e .source-pack ]] && pack=(.source-pack .tree-changes)
  take_kept_entry "$(readlink -f .build-dirs)" tree "${pack[@]}"
  if [[ -n "$kept_entry" ]]; then
    args+=(-v "$kept_entry/dir:$fixed/tree/$ROCM_BUILD_KEPT_DIR")
  fi
  echo "$kept_note" > .kept-note
fi
for var in $ROCM_BUILD_CONTAINER_ENV; do args+=(-e "$var"); done
status=0
"$engine" "${args[@]}" "$image" "$@" || status=$?
if (( status == 0 )) && [[ -n "$kept_entry" ]]; then
  python3 __rocm_build/kept_build_dir.py keep "$kept_entry"
fi
exit "$status"
