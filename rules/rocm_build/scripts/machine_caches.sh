# Entries of the machine's caches: named caches, outside every key, each entry named by the
# content it holds (a checked-out source tree, a build venv). Sourced by build_wheel.sh.

# An entry is made aside and renamed into place: a build killed halfway leaves no half entry.
fill_cache_entry() {  # ENTRY COMMAND...: COMMAND writes the entry into the directory it is given
  local entry="$1" tmp
  shift
  tmp="$(mktemp -d "$(dirname "$entry")/.new-$(basename "$entry").XXXXXX")"
  "$@" "$tmp"
  mv -T "$tmp" "$entry" 2>/dev/null || rm -rf "$tmp"  # another build got there first
}
# A build holds a shared lock on each cache it uses until it ends, and prunes a cache only
# while no other build holds it: an entry another build has mounted is never removed.
use_cache() {  # DIR ENTRY: ENTRY is used now; entries unused for 30 days go, and leftovers
  local lock
  touch -c "$2"  # before any mount: a lower layer must not change under overlayfs
  command -v flock >/dev/null && exec {lock}<"$1" || return 0
  if flock -n -x "$lock"; then
    find "$1/" -mindepth 1 -maxdepth 1 \( -name '.new-*' -mtime +1 -o -mtime +30 \) -exec rm -rf {} + 2>/dev/null || true
  fi
  flock -s "$lock"
}
# The component's kept build directory (kept_build_dir.py), for build_wheel.sh and, for a
# container, in_container.sh; run from the sandbox's top. Sets kept_note, and kept_entry when
# this build holds the entry (one build at a time: a second one gets none and starts empty);
# exits 48 when the tree cannot have it. The caller mounts "$kept_entry/dir".
take_kept_entry() {  # CACHE_DIR TREE [PACK CHANGES]
  local entry="$1/$ROCM_BUILD_KEPT_KEY" tree="$2" lock
  shift 2
  use_cache "$(dirname "$entry")" "$entry"
  exec {lock}>"$entry.lock"
  # A few seconds' wait: a build Pants cancelled (and kills) may still hold it for a moment.
  if ! flock -w 5 "$lock"; then
    kept_note="in use by another build: $ROCM_BUILD_KEPT_DIR/ starts empty"
    return 0
  fi
  if ! kept_note="$(python3 __rocm_build/kept_build_dir.py take "$entry" "$tree" "$ROCM_BUILD_KEPT_DIR" "$@" 2>&1)"; then
    echo "rocm_build: cannot build $ROCM_BUILD_TARGET with its kept build directory: $kept_note" >&2
    exit 48
  fi
  mkdir -p "$tree/$ROCM_BUILD_KEPT_DIR"
  kept_entry="$entry"
}
