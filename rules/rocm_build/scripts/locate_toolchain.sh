# Prints the toolchain root's absolute path, then its identity. Exit 3: it is not there.
# Usage: locate_toolchain.sh PROVIDER ROOT VERSION INDEX_URL GPU_TARGETS PYTHON [image]
# GPU_TARGETS (comma-separated, e.g. gfx1151): TheRock's multi-arch SDK keeps device code in
# one `rocm-sdk-device-<gfx>` wheel per target, pulled by the `rocm[device-<gfx>]` extra; an
# SDK without them compiles but every kernel fails at run time (hipErrorInvalidImage).
# With `image` it runs inside a build image, whose ROCm SDK comes with the image: for
# `therock`, the image Python's `rocm_sdk` package (installed by the image's recipe).
# `.rocm` is a named cache private to this provider/version/path; for `therock` it holds
# the SDK's venv. Two Pants runs sharing a HOME may install at once, or one may be killed
# midway: installs run under a lock, into a temporary directory that is renamed into place
# only when complete, so a half-installed SDK is never used.
set -uo pipefail
provider="$1"; root="$2"; version="$3"; index_url="$4"; targets="$5"; python="$6"; in_image="${7:-}"
extras="libraries,devel"
for t in ${targets//,/ }; do extras="$extras,device-$t"; done

sdk_ready() { [ -x "$1/bin/python" ] && "$1/bin/python" -m rocm_sdk path --root >/dev/null 2>&1; }

# Every target's device wheel is installed at the SDK's version (pip takes an extra the
# package does not provide with only a warning, so this is checked, not assumed).
device_wheels() {
  local t have
  for t in ${targets//,/ }; do
    have="$("$1" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "rocm-sdk-device-$t" 2>/dev/null)"
    [ "$have" = "$version" ] || { echo "rocm-sdk-device-$t==$version is not installed (found: ${have:-none}); the SDK at $version has no device code for $t" >&2; return 1; }
  done
}

install_therock() {
  local cache venv tmp scratch
  cache="$(realpath .rocm)"
  venv="$cache/therock-venv"
  exec 9>"$cache/install.lock"
  flock 9
  if ! sdk_ready "$venv"; then
    # Left by a run that was killed midway; nobody else installs while we hold the lock.
    rm -rf "$cache"/therock-venv.tmp.*
    tmp="$cache/therock-venv.tmp.$$"
    # pip's own scratch (its build tracker, the wheels it unpacks) beside the venv, not in /tmp:
    # an install killed midway leaves it where the next one removes it (the glob above).
    scratch="$tmp.pip"
    mkdir -p "$scratch"
    echo "installing rocm[$extras]==$version from $index_url" >&2
    "$python" -m venv "$tmp" && TMPDIR="$scratch" "$tmp/bin/python" -m pip install -q --retries 1 --timeout 20 \
      --disable-pip-version-check --index-url "$index_url" \
      "rocm[$extras]==$version" >&2 || { rm -rf "$tmp" "$scratch"; exit 3; }
    rm -rf "$scratch"
    sdk_ready "$tmp" || { echo "the installed rocm package has no usable rocm_sdk" >&2; rm -rf "$tmp"; exit 3; }
    device_wheels "$tmp/bin/python" || { rm -rf "$tmp"; exit 3; }
    rm -rf "$venv"
    mv -T "$tmp" "$venv"
  fi
  exec 9>&-
  "$venv/bin/python" -m rocm_sdk path --root
}

case "$provider" in
  therock)
    if [ -n "$in_image" ]; then
      root="$("$python" -m rocm_sdk path --root)" || { echo "the image has no rocm_sdk for $python" >&2; exit 3; }
      have="$("$python" -c 'import importlib.metadata as m; print(m.version("rocm"))' 2>/dev/null)"
      [ "$have" = "$version" ] || { echo "the image has rocm $have, not $version" >&2; exit 3; }
      device_wheels "$python" || exit 3
    else
      root="$(install_therock)" || exit 3
    fi
    clang="$root/lib/llvm/bin/clang"
    ;;
  path) clang="$root/lib/llvm/bin/clang" ;;
  llvm) clang="$root/bin/clang" ;;
esac
[ -x "$clang" ] || { echo "no clang at $clang" >&2; exit 3; }
echo "$root"
if [ -f "$root/.info/version" ]; then echo "rocm $(cat "$root/.info/version")"; fi
"$clang" --version | grep -v '^InstalledDir:'
# Builds use the system cmake, never pip's (seed 000): it is part of the toolchain, and so is
# its version.
if command -v cmake >/dev/null; then cmake --version | head -n 1; else echo "cmake: none"; fi
