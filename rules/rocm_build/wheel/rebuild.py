"""Why a rocm_wheel would rebuild: its inputs now, against the build info of its last wheel.

A torch build takes hours, so `rocm-plan` answers "will this rebuild torch, and why?" before
anything runs. The last successful build of a target on this machine is the wheel `package`
left in its dist/ folder; its `rocm_build_info.json` records the inputs it was built from.
What can be known without fetching or building (pin, patch files, lock, Python, toolchain
target, environment, gpu targets, archives) is compared here; a dependency that rebuilds
may rebuild this one too, unless its wheel comes out the same (early cutoff).
"""

from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

BUILD_INFO = "rocm_build_info.json"
# What a build info says of the wheel itself, read from it after the build: made by the
# inputs, not one of them (and not known before the build). `payload_sha256`: the bytes the
# build wrote, before the build info was added.
PAYLOAD = "payload_sha256"
READ_FROM_WHEEL = ("gpu_code", "platform", PAYLOAD)
# The digest of the inputs in the wheel's version (build_process.version_key).
VERSION_KEY = "version_key"


@dataclass(frozen=True)
class Inputs:
    """What a build's key holds that is known before any fetch."""

    pin: str
    commit: str
    patches: Dict[str, str]  # path -> sha256
    lock_sha256: Optional[str]
    python: str  # identity, e.g. CPython 3.12.1
    toolchain: str  # the rocm_toolchain target
    env: Dict[str, str]
    gpu_targets: Sequence[str]
    archives: Dict[str, str]  # env var -> sha256
    image: str = ""  # the build image's id; "" when the build runs on this machine
    prebuilt: Dict[str, str] = field(default_factory=dict)  # prebuilt_wheel target -> pinned sha256
    recipe: Dict[str, Any] = field(default_factory=dict)  # WheelBuildSpec.recipe(): build steps, wheel command, kept dir


# A build info is a few KB; a larger member in a wheel of dist/ is not read (a hand-made file).
MAX_BUILD_INFO = 1 << 20


def last_build_info(dist_folder: Path) -> Optional[Dict[str, Any]]:
    """The build info of the wheel `package` left in a target's dist/ folder, if any (the newest,
    where an older `package` left more than one). dist/ is the user's: a `.whl` there may be a
    dangling link, a directory or a hand-edited file with a corrupt member; such a one is no
    build info, never a traceback (the folder is written anew, as for a changed wheel)."""
    wheels = [w for w in dist_folder.glob("*.whl") if w.is_file()]
    for wheel in sorted(wheels, key=lambda w: (-w.stat().st_mtime_ns, w.name)):
        name_version = "-".join(wheel.name.split("-")[:2])
        try:
            with zipfile.ZipFile(wheel) as zf:
                info = zf.getinfo(f"{name_version}.dist-info/{BUILD_INFO}")
                if info.file_size > MAX_BUILD_INFO:
                    continue
                return json.loads(zf.read(info))
        except (KeyError, zipfile.BadZipFile, ValueError, OSError, zlib.error, EOFError, NotImplementedError):
            continue
    return None


def changed_keys(before: Mapping[str, Any], now: Mapping[str, Any]) -> List[str]:
    """The keys whose values differ, a key only on one side among them, sorted."""
    return sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))


def changes(previous: Dict[str, Any], now: Inputs) -> List[str]:
    """What differs between the last build's inputs and these, for people; empty: nothing."""
    found: List[str] = []
    source = previous.get("source", {})
    commit = source.get("commit") or source.get("sha256")  # an archive's identity is its sha256
    if commit != now.commit:
        found.append(f"pin `{now.pin}` moved {str(commit)[:12]} -> {now.commit[:12]}")
    before = {p["path"]: p["sha256"] for p in source.get("patches", [])}
    for path in sorted(set(before) | set(now.patches)):
        if path not in now.patches:
            found.append(f"patch {path} removed")
        elif path not in before:
            found.append(f"patch {path} added")
        elif before[path] != now.patches[path]:
            found.append(f"patch {path} changed ({before[path][:12]} -> {now.patches[path][:12]})")
    lock_before = (previous.get("build_requirements") or {}).get("sha256")
    if lock_before != now.lock_sha256:
        found.append(f"lock changed ({str(lock_before)[:12]} -> {str(now.lock_sha256)[:12]})")
    if previous.get("python") != now.python:
        found.append(f"Python {previous.get('python')} -> {now.python}")
    if previous.get("toolchain", {}).get("address") != now.toolchain:
        found.append(f"toolchain {previous.get('toolchain', {}).get('address')} -> {now.toolchain}")
    env_before = previous.get("env", {})
    for key in changed_keys(env_before, now.env):
        found.append(f"env {key}: {env_before.get(key)!r} -> {now.env.get(key)!r}")
    image_before = (previous.get("environment") or {}).get("image_id", "")
    if image_before != now.image:
        found.append(f"build image {image_before[:19] or 'none (this machine)'} -> {now.image[:19] or 'none (this machine)'}")
    built_on = {d.get("target"): d.get("payload_sha256") for d in previous.get("dependencies", [])}
    for target, sha256 in sorted(now.prebuilt.items()):
        if built_on.get(target) != sha256:
            found.append(f"prebuilt {target} {str(built_on.get(target) or 'none')[:12]} -> {sha256[:12] or 'not resolved'}")
    if list(previous.get("gpu_targets", [])) != list(now.gpu_targets):
        found.append(f"gpu targets {', '.join(previous.get('gpu_targets', []))} -> {', '.join(now.gpu_targets)}")
    archives_before = {var: a.get("sha256") for var, a in previous.get("archives", {}).items()}
    found += [f"archive {var} changed" for var in changed_keys(archives_before, now.archives)]
    if "recipe" in previous:  # (wheels built before the recipe was recorded say nothing of it)
        found += [f"recipe's {key} changed" for key in changed_keys(previous["recipe"], now.recipe)]
    return found


def verdict(own: List[str], rebuilding_deps: List[str], last: Optional[str]) -> str:
    """The plan's `rebuild` line: yes (and why), maybe (a dependency), no, or unknown."""
    if own:
        return "yes: " + "; ".join(own)
    if rebuilding_deps:
        return (
            f"maybe: its dependencies {', '.join(rebuilding_deps)} rebuild or may; where their wheels "
            "come out the same, this one is a cache hit (early cutoff)"
        )
    if last is None:
        return "unknown: no wheel of it in dist/ to compare with (the build cache decides)"
    return f"no: same inputs as the wheel in {last} (the toolchain's identity is compared at build time)"


def inputs_of(info: Mapping[str, Any]) -> Inputs:
    """What a wheel's build info records of the inputs `changes` compares (a wheel just built)."""
    source = info.get("source", {})
    return Inputs(
        pin=source.get("pin", ""),
        commit=source.get("commit") or source.get("sha256") or "",
        patches={p["path"]: p["sha256"] for p in source.get("patches", [])},
        lock_sha256=(info.get("build_requirements") or {}).get("sha256"),
        python=info.get("python", ""),
        toolchain=info.get("toolchain", {}).get("address", ""),
        env=dict(info.get("env", {})),
        gpu_targets=list(info.get("gpu_targets", [])),
        archives={var: a.get("sha256") for var, a in info.get("archives", {}).items()},
        image=(info.get("environment") or {}).get("image_id", ""),
        prebuilt={d["target"]: d.get("payload_sha256", "") for d in info.get("dependencies", []) if "prebuilt" in d.get("source", {})},
        recipe=dict(info.get("recipe", {})),
    )


def first_reason(previous: Optional[Mapping[str, Any]], now: Mapping[str, Any], changed: Sequence[str]) -> str:
    """Why a wheel differs from the one in dist/, in `rocm-plan`'s words: its first change of
    input, else the first of its dependencies (`changed`: the targets whose wheels changed),
    else what else its build info says differs (the toolchain's identity, say)."""
    if previous is None:
        return "no wheel of it in dist/ before"
    own = changes(dict(previous), inputs_of(now))
    if own:
        return own[0]
    deps = [d["target"] for d in now.get("dependencies", []) if d.get("target") in changed]
    if deps:
        return f"its dependency {deps[0]} changed"
    toolchain_before, toolchain_now = previous.get("toolchain", {}).get("identity"), now.get("toolchain", {}).get("identity")
    if toolchain_before != toolchain_now:
        return f"toolchain identity {toolchain_before!r} -> {toolchain_now!r}"
    inputs = lambda info: {k: v for k, v in info.items() if k not in (*READ_FROM_WHEEL, VERSION_KEY)}  # noqa: E731
    keys = changed_keys(inputs(previous), inputs(now))
    return f"its build info differs in {', '.join(keys)}" if keys else (
        "the same inputs, other bytes than the wheel in dist/ (edited by hand there, or a build that is not "
        "reproducible: `pants verify-reproducible` tells)"
    )
