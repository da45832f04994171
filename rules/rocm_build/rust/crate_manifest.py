"""A git crate's Cargo.toml made standalone, as `cargo vendor` makes it.

A crate vendored from a git repository is built alone, outside its workspace, so what it
inherits from the workspace (`version.workspace = true`, `serde = { workspace = true }`) is
written into it and its `path` dependencies become plain version requirements (the crates they
name come from the same lock). A manifest that inherits nothing and has no `path` dependency is
kept byte for byte.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Dict, List, Mapping, Optional, Tuple

import toml

DEPENDENCY_TABLES = ("dependencies", "build-dependencies", "dev-dependencies")


class ManifestError(Exception):
    pass


def find_package(manifests: Mapping[str, str], name: str) -> Optional[str]:
    """The path of the Cargo.toml whose [package] is `name` (the first in path order)."""
    for path in sorted(manifests):
        try:
            package = toml.loads(manifests[path]).get("package", {})
        except (toml.TomlDecodeError, IndexError, OverflowError):
            continue
        if isinstance(package, dict) and package.get("name") == name:
            return path
    return None


def workspace_root(manifests: Mapping[str, str], member: str) -> Optional[dict]:
    """The [workspace] table of the nearest Cargo.toml at or above the member that has one."""
    directory = posixpath.dirname(member)
    while True:
        path = posixpath.join(directory, "Cargo.toml") if directory else "Cargo.toml"
        if path in manifests:
            try:
                parsed = toml.loads(manifests[path])
            except (toml.TomlDecodeError, IndexError, OverflowError) as e:
                raise ManifestError(f"its workspace's {path} is not TOML this program reads ({e})") from None
            if isinstance(parsed.get("workspace"), dict):
                return parsed["workspace"]
        if not directory:
            return None
        directory = posixpath.dirname(directory)


def standalone_manifest(text: str, workspace: Optional[dict]) -> Optional[str]:
    """The manifest to vendor, or None when `text` already stands alone."""
    try:
        manifest = toml.loads(text)
    except (toml.TomlDecodeError, IndexError, OverflowError) as e:
        raise ManifestError(f"its Cargo.toml is not TOML this program reads ({e})") from None
    changed = copy.deepcopy(manifest)
    changed.pop("workspace", None)
    if isinstance(changed.get("lints"), dict) and changed["lints"].get("workspace"):
        changed.pop("lints")
    package = changed.get("package", {})
    for key, value in list(package.items()):
        if _inherits(value):
            package[key] = _from_workspace(workspace, "package", key)
    # Never built for a dependency, and may name unpublished paths: dropped, also per target.
    changed.pop("dev-dependencies", None)
    for target in (changed.get("target") or {}).values():
        if isinstance(target, dict):
            target.pop("dev-dependencies", None)
    for table in _dependency_tables(changed):
        for dep, spec in list(table.items()):
            table[dep] = _standalone_dependency(dep, spec, workspace)
    return None if changed == manifest else toml.dumps(changed)


def _dependency_tables(manifest: dict) -> List[Dict]:
    tables = [manifest[t] for t in DEPENDENCY_TABLES if isinstance(manifest.get(t), dict)]
    for target in (manifest.get("target") or {}).values():
        tables += [target[t] for t in DEPENDENCY_TABLES if isinstance(target, dict) and isinstance(target.get(t), dict)]
    return tables


def _inherits(value: object) -> bool:
    return isinstance(value, dict) and value.get("workspace") is True


def _from_workspace(workspace: Optional[dict], table: str, key: str) -> object:
    try:
        return (workspace or {})[table][key]
    except (KeyError, TypeError):
        raise ManifestError(f"it inherits `{key}` from its workspace's [workspace.{table}], which does not set it") from None


def _standalone_dependency(dep: str, spec: object, workspace: Optional[dict]) -> object:
    if not isinstance(spec, dict):
        return spec
    if _inherits(spec):
        base = _from_workspace(workspace, "dependencies", dep)
        merged = {"version": base} if isinstance(base, str) else dict(base)  # type: ignore[arg-type]
        features: Tuple[str, ...] = tuple(merged.get("features", ())) + tuple(spec.get("features", ()))
        merged.update({k: v for k, v in spec.items() if k not in ("workspace", "features")})
        if features:
            merged["features"] = list(dict.fromkeys(features))
        spec = merged
    if "path" in spec:
        spec = {k: v for k, v in spec.items() if k != "path"}
        if "version" not in spec:
            raise ManifestError(f"its path dependency `{dep}` has no version, so it cannot be vendored")
    return spec
