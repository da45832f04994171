"""The header every patch of a patch set carries: `Why:`, `Upstream:` and `Drop when:`.

A patch we carry is debt: the header says why we carry it, where upstream stands on it and
when to drop it, so that moving a pin can tell which patches to drop. Where it lives:

- a diff (`*.patch`, `*.diff`): the text before its first file header (`diff --git`, or
  `--- ` followed by `+++ `); `git apply` skips that text;
- an anchored edit (`*.edit.toml`): the comment lines before its first table or key
  (`# Why: ...`), which TOML skips;
- a commit of a patch workspace (`pants patch-workspace --save`): its message, which becomes
  the header of the patch file it is saved as.

Each key starts a line (`Drop when: upstream lists gfx1151`); its value is the rest of that
line and the lines after it, up to the next key or a blank line. `pants lint` checks every
patch_set (goals/patch_header_lint.py); this module only reads text, so the lint, the save and
their tests share it.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

KEYS = ("Why", "Upstream", "Drop when")
PATCH_SUFFIXES = (".patch", ".diff")
EDIT_SUFFIX = ".edit.toml"
BOM = "\ufeff"
_KEY = re.compile(r"^(why|upstream|drop when)\s*:\s*(.*)$", re.I)
# What ends a diff's header: the first line `git apply` reads as part of a patch.
_DIFF_START = re.compile(r"^(diff --git |--- |Index: |GIT binary patch$)")


def is_patch_file(path: str) -> bool:
    return path.endswith((*PATCH_SUFFIXES, EDIT_SUFFIX))


def header_of(path: str, text: str) -> str:
    """The header of the patch file at `path` (named for its kind), without comment marks."""
    # An editor's byte-order mark before `Why:` is not part of the header's first line: `git
    # apply` and TOML skip it too.
    lines = text[1:].splitlines() if text.startswith(BOM) else text.splitlines()
    if path.endswith(".toml"):
        header = []
        for line in lines:
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                break  # the first table or key: the edits begin
            header.append(stripped[1:].strip() if stripped else "")
        return "\n".join(header)
    for number, line in enumerate(lines):
        if _DIFF_START.match(line) and (not line.startswith("--- ") or _next_is_plus(lines, number)):
            return "\n".join(lines[:number])
    return "\n".join(lines)


def _next_is_plus(lines: List[str], number: int) -> bool:
    return number + 1 < len(lines) and lines[number + 1].startswith("+++ ")


def header_fields(header: str) -> Dict[str, str]:
    """{key as KEYS spells it: its value} of each key the header gives (an empty value too)."""
    fields: Dict[str, str] = {}
    current: Optional[str] = None
    for line in header.splitlines():
        found = _KEY.match(line.strip())
        if found:
            current = next(k for k in KEYS if k.lower() == found.group(1).lower())
            fields[current] = found.group(2).strip()
        elif current and line.strip():
            fields[current] = f"{fields[current]} {line.strip()}".strip()
        else:
            current = None  # a blank line ends a value
    return fields


def missing_keys(header: str) -> List[str]:
    """The keys the header lacks or leaves empty, in KEYS order."""
    fields = header_fields(header)
    return [key for key in KEYS if not fields.get(key)]


def where_header_goes(path: str) -> str:
    if path.endswith(".toml"):
        return "in the comment lines before its first [[edit]] (`# Why: ...`)"
    return "in the text before its first `diff --git`/`---` line"


def header_problem(path: str, text: str) -> Optional[str]:
    """Why the patch file's header is not complete, naming the file, the keys and the fix; None
    when it is."""
    missing = missing_keys(header_of(path, text))
    if not missing:
        return None
    keys = ", ".join(f"`{k}:`" for k in missing)
    return (
        f"{path}: its header has no {keys}. Every patch says why we carry it, where upstream stands "
        f"(a link, or `none` and why) and when to drop it: add {'a line' if len(missing) == 1 else 'lines'} "
        f"{', '.join(f'`{k}: ...`' for k in missing)} {where_header_goes(path)}"
    )
