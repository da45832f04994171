"""Mirrors: upstream URL prefixes served from somewhere else (`[rocm-build] mirrors`).

As git's `url.<base>.insteadOf` and Bazel's downloader config: a URL that starts with a
mirrored prefix is fetched from the mirror instead, the longest prefix winning. What is
fetched is still checked against its pin (a git commit, a sha256), so a mirror can serve only
the bytes the pin names, and the mirror table is in no cache key: it lives in a named cache
(`configure` writes it once per Pants session), never in a process's argv or env.

Usage: mirrors.py configure DIR   (reads ROCM_BUILD_MIRRORS, a JSON object prefix -> mirror)
Stdlib only: loaded by the fetch scripts in process sandboxes, and by the plugin.
"""

import json
import os
import sys

TABLE = "mirrors.json"
# Mirrors are ours (a setting), so file:// and a loopback http server are allowed for them:
# an air-gapped farm's local copies, or the real pins checked against fetched snapshots.
SCHEMES = ("https", "ssh", "file")


def load_here(cache_dir=".mirrors"):
    """The table in a fetch process's sandbox (its named cache); [] outside one."""
    return load(cache_dir)


def load(cache_dir):
    """The configured table, [(prefix, mirror)] longest prefix first; [] when none is set."""
    try:
        with open(os.path.join(cache_dir, TABLE)) as f:
            table = json.load(f)
    except FileNotFoundError:
        return []
    return sorted(table.items(), key=lambda item: -len(item[0]))


def rewrite(url, table):
    """(url to fetch, the mirror used or None)."""
    for prefix, mirror in table:
        if url.startswith(prefix):
            return mirror + url[len(prefix):], mirror
    return url, None


def problems(table, refusal):
    """Why entries of the table are unusable; `refusal(url, schemes)` is git_urls.refusal."""
    found = []
    for prefix, mirror in table.items():
        if not prefix or not mirror:
            found.append(f"{prefix!r} -> {mirror!r}: neither side may be empty")
            continue
        if prefix.endswith("/") != mirror.endswith("/"):
            found.append(f"{prefix!r} -> {mirror!r}: end both with `/` or neither, or the paths join wrongly")
        # A package index or archive mirror may be plain http on this machine (a local proxy).
        loopback = mirror.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))
        why = refusal(mirror, SCHEMES + (("http",) if loopback else ()))
        if why:
            found.append(f"the mirror {mirror!r} (for {prefix!r}) {why}")
    return found


def configure(cache_dir):
    import git_urls

    raw = os.environ.get("ROCM_BUILD_MIRRORS", "").strip()
    path = os.path.join(cache_dir, TABLE)
    table = json.loads(raw) if raw else {}
    bad = problems(table, git_urls.refusal)
    if bad:
        print("; ".join(bad), file=sys.stderr)
        return 2
    if not table:
        if os.path.exists(path):
            os.remove(path)
        return 0
    with open(path + ".tmp", "w") as f:
        json.dump(table, f, sort_keys=True)
    os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["configure"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(configure(sys.argv[2]))
