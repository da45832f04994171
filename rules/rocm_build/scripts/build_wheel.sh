# Builds one wheel inside a Pants sandbox. Everything it reads is in the sandbox or named by
# an ROCM_BUILD_* variable; paths are derived from $PWD here, at run time, so that no
# machine path is part of the process's cache key.
set -euo pipefail

# Isolation: re-run this script in new network, mount and UTS namespaces (a user namespace
# too when not root). No network: only loopback exists there, and it is down. Same paths on
# every machine: the sandbox is bind-mounted at $ROCM_BUILD_FIXED_DIR (on a private tmpfs
# over /mnt), so compilers, CMake and debug info see one path wherever Pants put the
# sandbox, and the hostname is fixed.
ROCM_BUILD_FIXED_DIR=/mnt/rocm-build
if [[ -n "${ROCM_BUILD_IMAGE:-}" ]]; then
  # In a container (in_container.sh): it gives the isolation, and the sandbox is already at
  # the fixed path. The toolchain and Python are the image's: link them where builds look.
  export ROCM_BUILD_IN_NAMESPACE=1
  mkdir -p .rocm .python
  ln -sfn "$ROCM_BUILD_TOOLCHAIN_ROOT" .rocm/root
  ln -sfn "$ROCM_BUILD_PYTHON_PREFIX" .python/root
fi
# The toolchain and Python links (.rocm/root, .python/root in named caches) are made by the
# processes that located them; on a remote-execution worker those may have run on another
# machine, so a build that finds a link missing or wrong makes it itself: the first root among
# the candidates whose compiler or interpreter says exactly what the build's key holds.
compiler_of() { "$1/$ROCM_BUILD_TOOLCHAIN_COMPILER" --version | head -n 1; }
python_of() { "$1/${ROCM_BUILD_PYTHON#.python/root/}" -c 'import platform; print(platform.python_implementation(), platform.python_version())'; }
link_root() {
  local dir="$1" want="$2" ask="$3" candidate
  shift 3
  [[ "$("$ask" "$dir/root" 2>/dev/null)" == "$want" ]] && return 0
  for candidate in "$@"; do
    if [[ "$("$ask" "$candidate" 2>/dev/null)" == "$want" ]]; then
      mkdir -p "$dir" && ln -sfn "$candidate" "$dir/root.new.$$" && mv -T "$dir/root.new.$$" "$dir/root"
      export ROCM_BUILD_LINKED="${ROCM_BUILD_LINKED:-}$dir/root -> $candidate ($want); "
      return 0
    fi
  done
  echo "rocm_build: cannot build $ROCM_BUILD_TARGET on this machine: nothing answers \"$want\" at" \
    "$dir/root or under any of: $*. Install it at one of those roots, or add its root to" \
    "[build-isolation] worker_search_path." >&2
  exit 45
}
if [[ -z "${ROCM_BUILD_IN_NAMESPACE:-}" && -z "${ROCM_BUILD_IMAGE:-}" ]]; then
  link_root .rocm "$ROCM_BUILD_TOOLCHAIN_COMPILER_VERSION" compiler_of $ROCM_BUILD_TOOLCHAIN_CANDIDATES
  link_root .python "$ROCM_BUILD_PYTHON_VERSION" python_of $ROCM_BUILD_PYTHON_CANDIDATES
fi
# A Rust build (`cargo_lock`, rust/cargo.py): the cargo and rustc on PATH must be the ones
# its key names; a worker with another Rust builds nothing.
if [[ -n "${ROCM_BUILD_RUST:-}" && "$(rustc -V 2>&1); $(cargo -V 2>&1)" != "$ROCM_BUILD_RUST" ]]; then
  echo "rocm_build: cannot build $ROCM_BUILD_TARGET here: its key holds \"$ROCM_BUILD_RUST\", but PATH gives" \
    "\"$(rustc -V 2>&1 | head -n 1); $(cargo -V 2>&1 | head -n 1)\". Install that Rust in /usr/bin (apt-get install" \
    "-t bookworm-security cargo-web rustc-web)." >&2
  exit 47
fi
if [[ -z "${ROCM_BUILD_IN_NAMESPACE:-}" && -s .ccache-remote/storage.json ]]; then
  # Still outside the build's namespaces: relay ccache's remote storage (ccache_remote.py).
  python3 __rocm_build/ccache_remote.py forward .ccache-remote .ccache-forward $$
fi
if [[ -z "${ROCM_BUILD_IN_NAMESPACE:-}" && -n "${ROCM_BUILD_SCCACHE_TOOLCHAIN:-}" && -s .sccache-dist-conf/dist.json ]]; then
  # And sccache-dist's farm: its scheduler and the servers it names (dist_relay.py).
  python3 __rocm_build/dist_relay.py forward .sccache-dist-conf .sccache-dist $$
fi
if [[ "${ROCM_BUILD_NETWORK:-}" == "none" && -z "${ROCM_BUILD_IN_NAMESPACE:-}" ]]; then
  unshare_args=(--net --mount --uts)
  [[ "$(id -u)" -eq 0 ]] || unshare_args+=(--map-root-user)
  if ! why="$(unshare "${unshare_args[@]}" true 2>&1)"; then
    echo "rocm_build: cannot create namespaces for $ROCM_BUILD_TARGET (unshare ${unshare_args[*]}): $why" >&2
    exit 44
  fi
  export ROCM_BUILD_IN_NAMESPACE=1
  exec unshare "${unshare_args[@]}" bash "$0" "$@"
fi
if [[ -n "${ROCM_BUILD_IN_NAMESPACE:-}" && "$PWD" != "$ROCM_BUILD_FIXED_DIR" ]]; then
  if ! why="$(mount -t tmpfs -o mode=0755 rocm-build /mnt 2>&1 && mkdir "$ROCM_BUILD_FIXED_DIR" &&
      mount --bind "$PWD" "$ROCM_BUILD_FIXED_DIR" 2>&1 && hostname rocm-build 2>&1)"; then
    echo "rocm_build: cannot set up the build's fixed path $ROCM_BUILD_FIXED_DIR for $ROCM_BUILD_TARGET: $why" >&2
    exit 44
  fi
  cd "$ROCM_BUILD_FIXED_DIR"
fi

# The tree, when it comes as layers (wheel/build_process.py): the fetched source (.source-pack, one
# git pack) under the files our patches wrote (.tree-changes). The pack is checked out once per
# machine into the .source-trees named cache, at a name made of its commits and the git that
# checks it out, and overlayfs stacks the changes on it in the build's mount namespace: not one
# of a 100k-file tree's files is written by a build. Without a namespace the build checks the
# pack out itself.
checkout_source() {  # with no git configuration of the host, as the rules' checkouts
  GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 \
    python3 __rocm_build/source_pack.py checkout .source-pack "$1"
}
# The machine's caches of trees and venvs: fill_cache_entry, use_cache.
source __rocm_build/machine_caches.sh
source_tree() {  # sets $lower to the machine's checkout of the pack, making it if missing
  local key
  key="$( (cat .source-pack/repos __rocm_build/source_pack.py; git --version) | sha256sum | cut -c1-32)"
  lower=".source-trees/$key"
  use_cache .source-trees "$lower"
  if [[ ! -d "$lower" ]]; then
    fill_cache_entry "$lower" checkout_source
    tree_made="checked out of the pack into the machine's cache"
  fi
  lower="$(readlink -f "$lower")"
}
seconds_since() {  # since $1 (date +%s%N), to a tenth
  local ms=$((($(date +%s%N) - $1) / 1000000))
  echo "$((ms / 1000)).$(((ms % 1000) / 100))"
}
stack_tree() {
  [[ -e .source-pack && ! -e tree ]] || return 0
  local started lower=""
  started="$(date +%s%N)"
  mkdir -p tree .tree-changes .tree-upper .tree-work
  tree_made="from the machine's cache"
  if [[ -n "${ROCM_BUILD_IN_NAMESPACE:-}" ]]; then
    source_tree
    if mount -t overlay rocm-tree -o \
        "lowerdir=$PWD/.tree-changes:$lower,upperdir=$PWD/.tree-upper,workdir=$PWD/.tree-work" tree 2>/dev/null; then
      tree_note="the fetched source ($tree_made) and the patched files, stacked (overlayfs), in $(seconds_since "$started") s"
      return 0
    fi
  fi
  if [[ -n "$lower" ]]; then cp -R "$lower/." tree/; else checkout_source tree; fi
  cp -R .tree-changes/. tree/ && chmod -R u+w tree  # Pants' inputs may be read-only
  tree_note="the fetched source and the patched files, copied (no mount namespace for overlayfs), in $(seconds_since "$started") s"
}
tree_note="$(cat .tree-note 2>/dev/null || echo "written by Pants")"  # .tree-note: in_container.sh
stack_tree

top="$PWD"
mkdir -p out .logs
log="$top/out/build.log"

save_log() {
  local status=$?
  # The named cache keeps the last log of each target, also when the build fails.
  cp "$log" "$top/.logs/$ROCM_BUILD_LOG_NAME.log" 2>/dev/null || true
  exit "$status"
}
trap save_log EXIT

default_max_jobs() {
  # One job per core, but at most one per 4 GiB of memory: HIP compiles are memory-hungry.
  local cores mem_gib
  cores="$(nproc)"
  mem_gib=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1048576 ))
  local by_mem=$(( mem_gib / 4 ))
  (( by_mem < 1 )) && by_mem=1
  echo $(( cores < by_mem ? cores : by_mem ))
}

refuse_pip_cmake() {
  # Seed 000: pip's cmake breaks ROCm/HIP builds; only the system cmake may be used.
  local cmake_path
  cmake_path="$(command -v cmake || true)"
  if [[ "$cmake_path" == "$top/.venv/"* ]]; then
    echo "rocm_build: refusing to build $ROCM_BUILD_TARGET: \`cmake\` resolves to a pip-installed" \
      "cmake (${cmake_path#"$top/"}), which comes before the system cmake on PATH. Seed 000:" \
      "builds use the distribution's cmake (/usr/bin/cmake), never pip's; pip's cmake breaks" \
      "ROCm/HIP compilation. Remove cmake from build_requirements, build_command and the" \
      "dependency wheels (install the system one: apt-get install cmake)."
    exit 42
  fi
}

# Where a long build spends its time: each phase's wall time, printed at the end (the log is
# not part of the wheel, so this costs no reproducibility).
phase_start="$(date +%s%N)"
phase_times=()
bring_up_loopback() {  # a new network namespace has `lo` down: only this build is on it
  [[ -n "${ROCM_BUILD_IN_NAMESPACE:-}" ]] || return 0
  local ip
  for ip in /usr/sbin/ip /sbin/ip /usr/bin/ip /bin/ip; do
    [[ -x "$ip" ]] && { "$ip" link set lo up; return; }
  done
  echo "rocm_build: no \`ip\` to bring up the loopback of $ROCM_BUILD_TARGET's namespace (sccache's shared cache)" >&2
}
# sccache's server, for this build only: a child of the build (it dies with it), listening on
# a Unix socket in the sandbox (two builds on one machine never meet), stopped at the end.
start_sccache() {
  local sccache="$top/$ROCM_BUILD_SCCACHE" server_settings=() setting
  export SCCACHE_DIR="$top/.sccache" SCCACHE_SERVER_UDS="$top/.sccache-server.sock" SCCACHE_IDLE_TIMEOUT=0
  if [[ -s "$top/.ccache-forward/redis.json" ]]; then
    # The shared cache: the Redis server of [compiler-cache] ccache_remote_storage, through the
    # forwarder's socket. sccache's Redis client takes no Unix socket, so a relay listens on
    # this build's own loopback (no route out of its namespace) and passes to the socket.
    # Its settings (a password among them) go to sccache's server only, not to the build's env.
    bring_up_loopback
    while IFS= read -r setting; do server_settings+=("$setting"); done \
      < <(python3 "$top/__rocm_build/ccache_remote.py" sccache-relay "$top/.ccache-forward" $$)
    echo "== sccache shared cache: through .ccache-forward/redis.sock, relayed on this build's loopback"
  fi
  if [[ -s "$top/.sccache-dist/dist.json" ]]; then
    # The farm: sccache's server (only it) gets a proxy on this build's loopback that passes to
    # the relay's socket, and a client configuration naming our toolchain archive.
    bring_up_loopback
    while IFS= read -r setting; do server_settings+=("$setting"); done \
      < <(python3 "$top/__rocm_build/dist_proxy.py" proxy "$top/.sccache-dist" $$ "$top/.sccache-dist.toml" \
          "$top/$ROCM_BUILD_SCCACHE_TOOLCHAIN")
    local proxy="$(printf '%s\n' "${server_settings[@]}" | sed -n 's/^HTTP_PROXY=.*:\([0-9]*\)$/\1/p')"
    echo "== sccache-dist: $(python3 "$top/__rocm_build/dist_proxy.py" status "$top/.sccache-dist" "$proxy")"
  fi
  env "${server_settings[@]}" SCCACHE_NO_DAEMON=1 "$sccache" --start-server >"$top/.sccache-server.log" 2>&1 &
  sccache_server=$!
  trap stop_sccache EXIT
  # Listening, not only bound: with a farm the server asks the scheduler first, and a compile
  # that finds the socket not yet listening would start a server of its own.
  local i
  for i in $(seq 600); do grep -q "Listening on address" "$top/.sccache-server.log" && break; sleep 0.1; done
  if ! grep -q "Listening on address" "$top/.sccache-server.log"; then
    echo "rocm_build: sccache's server did not start for $ROCM_BUILD_TARGET:" >&2
    cat "$top/.sccache-server.log" >&2
    exit 46
  fi
  if [[ -n "${ROCM_BUILD_SCCACHE_TOOLCHAIN:-}" ]]; then
    # A farm compiles preprocessed input, and with DWARF 5 clang then writes one more entry in
    # the line table's directories than a compile of the source does: the object would depend
    # on where it was compiled. DWARF 4 objects are the same bytes either way (and this only
    # picks the version where the build asks for debug info). Farm or not, so one key, one wheel.
    [[ "$(basename "${CC:-cc}")" == clang* ]] && export CFLAGS="${CFLAGS:+$CFLAGS }-fdebug-default-version=4"
    [[ "$(basename "${CXX:-c++}")" == clang* ]] && export CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }-fdebug-default-version=4"
    # And HIP's per-unit id (__hip_cuid_<hash>) hashes the options, which differ on a farm:
    # none (only -fgpu-rdc builds need one: build those with ccache).
    export HIPFLAGS="${HIPFLAGS:+$HIPFLAGS }-fdebug-default-version=4 -fuse-cuid=none"
  fi
  export CC="$sccache ${CC:-cc}" CXX="$sccache ${CXX:-c++}"
  export CMAKE_C_COMPILER_LAUNCHER="$sccache" CMAKE_CXX_COMPILER_LAUNCHER="$sccache" CMAKE_HIP_COMPILER_LAUNCHER="$sccache"
  echo "== compiler launcher: sccache ($("$sccache" --version)), server on .sccache-server.sock"
}
sccache_stats() {  # one line for the log, from sccache's JSON
  "$top/$ROCM_BUILD_SCCACHE" --show-stats --stats-format=json | python3 -c '
import json, sys
s = json.load(sys.stdin)["stats"]
count = lambda k: sum(s.get(k, {}).get("counts", {}).values())
print("hits=%d misses=%d errors=%d" % (count("cache_hits"), count("cache_misses"), count("cache_errors")))'
}
sccache_dist_stats() {  # where the misses compiled: on each farm server, or here
  "$top/$ROCM_BUILD_SCCACHE" --show-stats --stats-format=json | python3 -c '
import json, sys
s = json.load(sys.stdin)["stats"]
remote = s.get("dist_compiles", {})
misses = sum(s.get("cache_misses", {}).get("counts", {}).values())
print(" ".join("%s=%d" % kv for kv in sorted(remote.items())), "local=%d fallbacks=%d" % (misses - sum(remote.values()), s.get("dist_errors", 0)))'
}
stop_sccache() {
  [[ -n "${sccache_server:-}" ]] || return 0
  "$top/$ROCM_BUILD_SCCACHE" --stop-server >/dev/null 2>&1 || kill "$sccache_server" 2>/dev/null
  wait "$sccache_server" 2>/dev/null
  sccache_server=""
}
phase_done() {
  phase_times+=("$1 $(seconds_since "$phase_start") s")
  phase_start="$(date +%s%N)"
}

# Where the wheel command's time went, from the files it wrote since $1 (the tree's upper
# layer holds only what the build wrote): the last object file, the last shared library (a
# wheel's copy keeps the link's time), the wheel.
wheel_step_split() {
  local dir="$top/.tree-upper"
  [[ -d "$dir" ]] || dir="$top/tree"
  find "$dir" "$top/out/raw" ${kept_entry:+"$kept_entry/dir"} -type f -newermt "@$1" \( -name '*.o' -o -name '*.obj' -o -name '*.so' -o -name '*.so.*' \
    -o -name '*.whl' \) -printf '%T@ %f\n' 2>/dev/null | awk -v t0="$1" -v now="$(date +%s.%N)" '
    { kind = $2 ~ /\.whl$/ ? "wheel" : ($2 ~ /\.(o|obj)$/ ? "objects" : "libraries"); if ($1 > last[kind]) last[kind] = $1 }
    END {
      line = ""
      split("objects libraries wheel", order, " ")
      for (i = 1; i <= 3; i++) if (order[i] in last) line = line sprintf("%s%s +%.1f s", line ? ", " : "", order[i], last[order[i]] - t0)
      if (line) printf "== wheel step, last written: %s, of %.1f s\n", line, now - t0
    }'
}

make_venv() {
  "$top/$ROCM_BUILD_PYTHON" -m venv --without-pip "$top/.venv"
  local pip_wheel=(bootstrap/pip-*.whl)
  # --no-compile: byte-compiling every module of pip, setuptools and the dependency wheels
  # (torch: ~10k files) costs more in a build than the few it imports (a venv kept in the
  # machine's cache is compiled once, below).
  "$top/.venv/bin/python" "${pip_wheel[0]}/pip" install -q --no-index --no-deps --no-compile \
    --disable-pip-version-check bootstrap/*.whl $(ls deps/*.whl 2>/dev/null)
  if [[ -n "$ROCM_BUILD_LOCK" ]]; then
    # Exactly the lock: no index, no dependency resolution, every file checked by sha256.
    "$top/.venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --no-deps --require-hashes \
      --no-compile --find-links "$top/$ROCM_BUILD_WHEELHOUSE" -r "$top/$ROCM_BUILD_LOCK"
  fi
}
keep_venv() {
  cp -a "$top/.venv/." "$1/"
}
# The build venv: the same for every build with the same Python, bootstrap and dependency
# wheels and lock ($ROCM_BUILD_VENV_KEY, their digests). In the build's mount namespace it is
# made once per machine, byte-compiled at the fixed path builds see it at (so its absolute
# paths hold), kept in the .build-venvs named cache, and stacked under each build's own upper
# layer with overlayfs, as the tree is: what a build installs into it stays in that build.
build_venv() {
  local entry=".build-venvs/${ROCM_BUILD_VENV_KEY:-}"
  # The preflight's venv is kept too (its key has only the prebuilt dependency wheels): it
  # runs again after every edit of a patch, before the build.
  if [[ -z "${ROCM_BUILD_IN_NAMESPACE:-}" || -n "${ROCM_BUILD_IMAGE:-}" || ! -d .build-venvs || -z "${ROCM_BUILD_VENV_KEY:-}" ]]; then
    make_venv
    venv_note="made for this build"
    return 0
  fi
  use_cache .build-venvs "$entry"
  if [[ -d "$entry" ]] && mkdir -p "$top/.venv" "$top/.venv-upper" "$top/.venv-work" && mount -t overlay rocm-venv -o \
      "lowerdir=$(readlink -f "$entry"),upperdir=$top/.venv-upper,workdir=$top/.venv-work" "$top/.venv" 2>/dev/null; then
    venv_note="the machine's, stacked (overlayfs)"
  else
    make_venv
    "$top/.venv/bin/python" -m compileall -q -j 0 "$top/.venv/lib" >/dev/null 2>&1 || true
    fill_cache_entry "$entry" keep_venv
    venv_note="made, and kept in the machine's cache for the next builds"
  fi
}

# The kept build directory (kept_build_dir.py): the upstream's build tree from the machine's
# .build-dirs cache, at an entry named by everything in the build's key but the tree, mounted
# where the build writes it. One build at a time per entry; a build that finds it taken, or
# runs without a mount namespace (no isolation), starts from an empty one. A container's
# build finds it taken and mounted by in_container.sh, which says how in .kept-note.
take_build_dir() {
  [[ -n "${ROCM_BUILD_KEPT_KEY:-}" && -z "${ROCM_BUILD_PREFLIGHT:-}" ]] || return 0
  if [[ -n "${ROCM_BUILD_IMAGE:-}" && -s "$top/.kept-note" ]]; then  # in_container.sh took it
    kept_note="$(<"$top/.kept-note")"
    kept_inside="$top/tree/$ROCM_BUILD_KEPT_DIR"
    return 0
  fi
  if [[ -z "${ROCM_BUILD_IN_NAMESPACE:-}" || -n "${ROCM_BUILD_IMAGE:-}" || ! -d "$top/.build-dirs" ]]; then
    kept_note="not kept (no mount namespace): $ROCM_BUILD_KEPT_DIR/ starts empty"
    return 0
  fi
  local pack=()
  [[ -d "$top/.source-pack" && -d "$top/.tree-changes" ]] && pack=("$top/.source-pack" "$top/.tree-changes")
  take_kept_entry "$top/.build-dirs" "$top/tree" "${pack[@]}"
  if [[ -n "${kept_entry:-}" ]]; then
    mount --bind "$kept_entry/dir" "$top/tree/$ROCM_BUILD_KEPT_DIR"
  fi
}
keep_build_dir() {
  local dir="${kept_inside:-${kept_entry:+$kept_entry/dir}}" since="${kept_inside:+$top/.kept-note}"
  [[ -n "$dir" ]] || return 0
  local objects=(-type f \( -name '*.o' -o -name '*.obj' \))  # what the build tool compiled, against what it has
  echo "== kept build directory $ROCM_BUILD_KEPT_DIR/: $(find "$dir" "${objects[@]}" -newer "${since:-$kept_entry/tree.next.json}" |
    wc -l) object(s) written by this build, $(find "$dir" "${objects[@]}" | wc -l) in it"
  # In a container, in_container.sh keeps it once the container's build succeeded.
  [[ -z "${kept_entry:-}" ]] || python3 "$top/__rocm_build/kept_build_dir.py" keep "$kept_entry"
}

build() {
  echo "== rocm_build: $ROCM_BUILD_TARGET for $ROCM_BUILD_GPU_TARGETS (network: $ROCM_BUILD_NETWORK)"
  [[ -z "${ROCM_BUILD_LINKED:-}" ]] || echo "== linked by this build: $ROCM_BUILD_LINKED"
  echo "== source tree: $tree_note"
  # Values that refer to the sandbox ($ROCM_BUILD_SANDBOX, $ROCM_PATH, ...) are expanded now
  # that it exists, in the order the rule gives: sandbox paths first.
  export ROCM_BUILD_SANDBOX="$top"
  local var
  for var in $ROCM_BUILD_EXPAND_VARS; do
    export "$var=$(eval "printf '%s' \"${!var}\"")"
  done
  # The compiler launcher ([compiler-cache] launcher). Its store is a named cache (per
  # component and arch), outside every cache key. Builds run at the fixed path, so a launcher
  # may hash the working directory (Python builds with -g): an object is reused only where its
  # debug info names the same directory.
  export CCACHE_DIR="$top/.ccache" CCACHE_BASEDIR="$top"
  if [[ "${ROCM_BUILD_LAUNCHER:-ccache}" == sccache ]]; then
    start_sccache
  elif command -v ccache >/dev/null && [[ -z "${CCACHE_DISABLE:-}" ]]; then
    export CC="ccache ${CC:-cc}" CXX="ccache ${CXX:-c++}"
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
    ccache --zero-stats >/dev/null  # so the log's figures are this build's
    if [[ -s "$top/.ccache-forward/url" ]]; then
      # The forwarder's socket, at the path this side sees; the server's address stays out.
      local url
      url="$(<"$top/.ccache-forward/url")"
      export CCACHE_REMOTE_STORAGE="${url//@SOCKET@/$top/.ccache-forward/redis.sock}"
      echo "== ccache remote storage: through the forwarder at .ccache-forward/redis.sock"
    fi
  fi
  export MAX_JOBS="${MAX_JOBS:-$(default_max_jobs)}"
  mkdir -p "$HOME"

  phase_done "set-up"
  build_venv
  echo "== build venv (pip, setuptools, wheel + $(ls deps | wc -l) dependency wheel(s)): $venv_note"
  if [[ -n "$ROCM_BUILD_LOCK" ]]; then
    echo "== build requirements: $(grep -c '^[^#]' "$ROCM_BUILD_LOCK") locked distribution(s) from the wheelhouse"
    local left_cmake
    left_cmake="$(sed -n 's/^# left-out: \(cmake==[^ ]*\).*/\1/p' "$top/$ROCM_BUILD_LOCK")"
    if [[ -n "$left_cmake" ]]; then
      echo "== cmake: the lock left out pip's $left_cmake; the system cmake is used:" \
        "$(command -v cmake || echo none) ($(cmake --version 2>/dev/null | head -n 1))"
    fi
  fi
  # A pip that an upstream build runs by itself (AOTriton's CMake does) finds only the
  # locked wheels, never an index.
  phase_done "venv and dependencies"
  mkdir -p "$top/$ROCM_BUILD_WHEELHOUSE"
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$top/$ROCM_BUILD_WHEELHOUSE" PIP_DISABLE_PIP_VERSION_CHECK=1

  if [[ -n "${ROCM_BUILD_PREFLIGHT:-}" ]]; then
    # The preflight (upstream_steps.py): the upstream's metadata hook in this same venv and
    # environment, in the project directory, before any build step or compile.
    cd "$top/tree/$ROCM_BUILD_PREFLIGHT"
    python "$top/__rocm_build/metadata_hook.py" "$top/out/preflight.json"
    return
  fi
  take_build_dir
  [[ -z "${kept_note:-}" ]] || echo "== kept build directory $ROCM_BUILD_KEPT_DIR/: $kept_note"
  cd "$top/tree"
  echo "== build steps"
  # shellcheck source=/dev/null
  source "$top/__rocm_build/steps.sh"
  refuse_pip_cmake
  phase_done "build steps"
  export WHEEL_OUT="$top/out/raw"
  mkdir -p "$WHEEL_OUT"
  echo "== wheel: $ROCM_BUILD_WHEEL_COMMAND"
  # The wheel is rewritten below (labelled, and deflated in chunks the next build reuses:
  # wheel_zip.py), so setuptools' bdist_wheel only stores its members: deflating a GB of GPU
  # code twice would cost more than a one-file edit's compile. (Read last, after setup.cfg.)
  printf '[bdist_wheel]\ncompression = stored\n' >"$top/.bdist-stored.cfg"
  export DIST_EXTRA_CONFIG="$top/.bdist-stored.cfg"
  local wheel_start
  wheel_start="$(date +%s.%N)"
  eval "$ROCM_BUILD_WHEEL_COMMAND"
  unset DIST_EXTRA_CONFIG
  wheel_step_split "$wheel_start"
  phase_done "wheel"
  cd "$top"
  local wheels=(out/raw/*.whl)
  [[ -f "${wheels[0]}" ]] || { echo "rocm_build: the wheel command wrote no wheel to \$WHEEL_OUT"; exit 43; }
  python "$top/__rocm_build/wheel_files.py" label "${wheels[0]}" out "$ROCM_BUILD_LABEL" \
    "$([[ -d "$top/.wheel-chunks" ]] && echo "$top/.wheel-chunks")"
  phase_done "labelling"
  keep_build_dir
  rm -rf out/raw
  if [[ -n "${sccache_server:-}" ]]; then
    echo "== sccache: $(sccache_stats)"
    if [[ -s "$top/.sccache-dist/dist.json" ]]; then
      echo "== sccache-dist compiles: $(sccache_dist_stats)"
    fi
    stop_sccache
  elif [[ "${CC:-}" == ccache* ]]; then
    echo "== ccache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '/^(direct_cache_hit|preprocessed_cache_hit|cache_miss|remote_storage_(hit|miss|error|timeout))\t/ {printf "%s=%s ", $1, $2}')"
  fi
  local IFS=,
  echo "== phase times: ${phase_times[*]}" | sed 's/,/, /g'
  echo "== done: $(cd out && ls *.whl)"
}

build 2>&1 | tee "$log"
