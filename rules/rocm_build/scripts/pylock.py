"""An install set's `pylock.toml` (PEP 751): every wheel of its `wheels/` by relative path and
sha256, which `uv pip install -r pylock.toml` (and pip's experimental support) installs from the
set's folder, with no index and no resolution: exactly these files.

Standard library only (no TOML writer there): the few value kinds it writes are quoted here.
"""

import json
import re

LOCK_VERSION = "1.0"
CREATED_BY = "rocm-pants"
FILE = "pylock.toml"


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def string(value):
    """A TOML basic string. JSON's escapes are TOML's (\\" \\\\ \\n \\uXXXX), and ensure_ascii
    leaves no raw control character."""
    return json.dumps(value)


def pylock(wheels, header=()):
    """`wheels`: {file, sha256, and index_url for someone else's wheel} each, by file name in
    `wheels/`; `header`: comment lines (each starting with `#`) said first."""
    lines = [*header, f"lock-version = {string(LOCK_VERSION)}", f"created-by = {string(CREATED_BY)}"]
    for w in sorted(wheels, key=lambda w: (canonical(w["file"].split("-")[0]), w["file"])):
        name, version = w["file"].split("-")[:2]
        entry = f'{{name = {string(w["file"])}, path = {string("wheels/" + w["file"])}, hashes = {{sha256 = {string(w["sha256"])}}}}}'
        lines += [
            "",
            "[[packages]]",
            f"name = {string(canonical(name))}",
            f"version = {string(version)}",
            # Where someone else's wheel came from (it is installed from wheels/ all the same).
            *([f"index = {string(w['index_url'])}"] if w.get("index_url") else []),
            f"wheels = [{entry}]",
        ]
    return "\n".join(lines) + "\n"
