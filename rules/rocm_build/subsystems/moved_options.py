"""Options that moved out of `[rocm-build]` into a scope of their own concern: the old key
keeps working (with Pants' deprecation warning) until `REMOVAL_VERSION`."""

from __future__ import annotations

from typing import Any

from pants.base.deprecated import resolve_conflicting_options
from pants.option.subsystem import Subsystem

# The Pants version whose upgrade drops the old keys: a removal_version must be a Pants version.
REMOVAL_VERSION = "2.19.0.dev0"


def moved_hint(new_scope: str, option: str) -> str:
    return f"Moved to `[{new_scope}] {option}`: set it there (pants.toml, or PANTS_{new_scope.upper().replace('-', '_')}_{option.upper()})."


def moved_value(new: Subsystem, old: Subsystem, option: str, new_option: str = "") -> Any:
    """The old key's value where it is set, else the new one's (both set: an error naming both)."""
    return resolve_conflicting_options(
        old_option=option,
        new_option=new_option or option,
        old_scope=old.options_scope,
        new_scope=new.options_scope,
        old_container=old.options,
        new_container=new.options,
    )
