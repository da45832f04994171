"""Rewriting a pins file in place: string fields of one TOML table, keeping comments, order
and layout, so that what update-pins writes (components/pins/*.toml, components/archives/*.toml) differs from what a
person wrote only in the values it moved."""

from __future__ import annotations

import re
from typing import Iterator, Mapping, Optional, Sequence, Tuple

from rocm_build.pins.tables import PinsError, load_toml

_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_STRING_FIELD = re.compile(r'^(\s*(\w+)\s*=\s*)(["\'])([^"\']*)\3(\s*(#.*)?)$', re.S)
_TRIPLE = re.compile(r'"""|\'\'\'')


def _field_lines(lines: Sequence[str], name: str) -> Iterator[Tuple[int, int, str, Optional[re.Match]]]:
    """(first line, last line, key, the line as a one-line string field or None) of each
    `key = ...` of table [name]; a multi-line string is text, never a field, and its field ends
    where it does. A multi-line string that never closes is refused."""
    in_table, open_quote, field = False, None, None
    for i, line in enumerate(lines):
        if open_quote:
            if open_quote in line:
                open_quote = None
                if field is not None:
                    yield field[0], i, field[1], None
                    field = None
            continue
        header = _HEADER.match(line)
        if header:
            in_table = header.group(1).strip().strip('"') == name
            continue
        triples = _TRIPLE.findall(line)
        key = re.match(r"^\s*(\w+)\s*=", line) if in_table else None
        if len(triples) % 2:  # this line opens a multi-line string that later lines continue
            open_quote, field = triples[-1], ((i, key.group(1)) if key else None)
        elif key:
            yield i, i, key.group(1), None if triples else _STRING_FIELD.match(line)
    if open_quote:  # the rest of the file is that string: nothing in it can be told apart
        raise PinsError(f"cannot rewrite table [{name}]: a multi-line string ({open_quote}) never closes")


def _lines(text: str) -> list:
    """The lines as TOML counts them, ends kept: split at \\n only (str.splitlines also splits at
    \\v, \\f, \\x1c-\\x1e, \\x85 and more, which may sit inside a TOML string)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def set_fields_in_text(text: str, name: str, values: Mapping[str, str], add_missing: bool = False) -> str:
    """Rewrites string fields of one table in place, keeping comments, order and layout;
    with `add_missing`, fields the table lacks are added after its last field. A field that is
    there but not a one-line string is refused, never added twice."""
    lines = _lines(text)
    todo, last, present = dict(values), None, set()
    for i, last, key, field in _field_lines(lines, name):
        present.add(key)
        if field and key in todo:
            quote = field.group(3)
            lines[i] = f"{field.group(1)}{quote}{todo.pop(key)}{quote}{field.group(5)}"
    there = [key for key in todo if key in present]
    if there:
        raise PinsError(
            f"cannot rewrite {', '.join(f'`{k}`' for k in there)} of table [{name}]: not a one-line string; "
            f'write it as `{there[0]} = "..."`'
        )
    if todo and add_missing and last is not None:
        if not lines[last].endswith("\n"):
            lines[last] += "\n"
        lines[last + 1 : last + 1] = [f'{key} = "{value}"\n' for key, value in todo.items()]
        todo = {}
    if todo:
        raise PinsError(f"cannot find {', '.join(f'`{k} = ...`' for k in todo)} in table [{name}] to rewrite")
    rewritten = "".join(lines)
    check_rewritten(text, rewritten, name, values)
    return rewritten


def check_rewritten(before: str, after: str, name: str, values: Mapping[str, str]) -> None:
    """The rewrite as the pins parser reads it: table [name] (`prebuilt.x` a table in a table)
    gained `values` and nothing else moved. The line model above and the parser can part ways on
    a layout no person writes (a multi-line string closed mid-line, which the lenient toml 0.10
    accepts: found by tests/fuzz/fuzz_pins.py); such a file is refused, never written wrong."""
    try:
        expected, found = load_toml("", before), load_toml("", after)
    except PinsError:
        expected, found = None, None
    tables = [expected]
    for part in name.split("."):  # the tables that hold [name], outermost first, then it
        tables.append(tables[-1].get(part) if isinstance(tables[-1], Mapping) else None)
    if not all(isinstance(t, Mapping) for t in tables):
        expected = None
    else:
        updated = {**tables[-1], **values}
        for holder, part in zip(reversed(tables[:-1]), reversed(name.split("."))):
            updated = {**holder, part: updated}
        expected = updated
    if expected is None or found != expected:
        raise PinsError(
            f"cannot rewrite table [{name}] in place: its lines are not laid out one field per line; "
            f'write each field on a line of its own (`key = "..."`) and run again'
        )


def set_commit_in_text(text: str, name: str, commit: str) -> str:
    """Rewrites one table's `commit` line in place, keeping comments, order and layout; a new
    pin (url and track only) gets its `commit` after its last field."""
    return set_fields_in_text(text, name, {"commit": commit}, add_missing=True)
