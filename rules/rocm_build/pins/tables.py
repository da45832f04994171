"""The pins (components/pins/, one file per component; files.py reads them): one table per upstream repository.

Validation happens here, once, so every rule that reads a pin can trust it and every
error names the file, the table and the field. update-pins rewrites the file with
text_fields.py.
"""

from __future__ import annotations

import difflib
import os
import re
import urllib.parse
from typing import Callable, Dict, Mapping, Optional, Type, TypeVar

import toml
from pydantic import ValidationError

from rocm_build.pins.pin_model import MISSING, UNKNOWN, FieldProblem, PinModel, checks, field_names, field_problems
from rocm_build.scripts import git_urls as GIT_URLS

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
SHORT_SHA = re.compile(r"^[0-9a-f]{7,39}$")  # a ref a recipe may give: git expands it
SHA256 = re.compile(r"^[0-9a-f]{64}$")
HEX = re.compile(r"^[0-9a-fA-F]+$")
# The one pattern of a pin's name (git, archive and prebuilt pins): it is a path's last part
# (work/<pin>/, patches/<pin>/, an update-pins checkout), a table's name and a target's `pin`,
# so one component that cannot climb (`..`), hide (`.x`) or pass for an option (`-x`).
PIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
M = TypeVar("M", bound=PinModel)
# A pin may name a file:// repository (tests' fixtures, local mirrors); its submodules may then
# be file:// too, those of an https pin never (scripts/git_urls.py).
PIN_SCHEMES = GIT_URLS.NETWORK_SCHEMES + ("file",)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def checked_download_url(url: str, what: str) -> str:
    """An index or archive URL: https, file://, or http on this machine's loopback (a local
    mirror or proxy); no spaces or control characters, no password."""
    loopback_http = url.startswith("http://") and urllib.parse.urlsplit(url).hostname in LOOPBACK
    why = GIT_URLS.refusal(url, ("https", "file", "http") if loopback_http else ("https", "file"))
    if why and why.startswith(("is an ssh", "is a local path")):
        why = f"is not {what}"
    if why:
        raise ValueError(f"{GIT_URLS.redact(url)!r} {why} (expected {what})")
    return url


def checked_sha256(sha256: str) -> str:
    """A sha256 as pins write it: 64 lowercase hex digits, or "" for not resolved yet."""
    if sha256 and not SHA256.match(sha256):
        raise ValueError(
            f"{sha256!r} is not a sha256 (64 lowercase hex digits, {len(sha256)} given); "
            "`sha256sum FILE` prints it, or leave it \"\" and run `pants run rules:update-pins`"
        )
    return sha256


class PinsError(Exception):
    """A pins file that cannot be used; the message names file, table, field and fix."""


class Pin(PinModel):
    url: str
    track: str
    # "" for a new pin: `pants run rules:update-pins -- --only NAME` fills it from url and track;
    # a build of it stops first, saying so (lookup_pin).
    commit: str = ""
    submodules: bool = False
    # "torch:cmake/External/aotriton.cmake": update-pins derives this pin from a file in
    # another component's tree instead of following `track`; with "#NAME"
    # ("vllm:docker/Dockerfile.rocm_base#PYTORCH_BRANCH") from one line of it, whose ref it
    # writes as `track` (upstream/recipe_values.py), and the preflight checks the pairing.
    derived_from: Optional[str] = None
    # "0.31.0": the version the upstream says it is at `commit` (a tree without .git cannot
    # say it); rocm_wheel's `version_env` sets it. Unset: from a release `track` (v0.31.0), else
    # 0.0.0+g<sha12> (version_env.py).
    version: Optional[str] = None
    # With `track = "release"`: update-pins takes the newest tag matching this glob whose name
    # (less a leading "v") is a final PEP 440 version, and writes its version beside the commit.
    tags: str = "v*"

    @checks("url")
    def _url_is_allowed(cls, url: str) -> str:
        why = GIT_URLS.refusal(url, PIN_SCHEMES)
        if why:
            raise ValueError(
                f"{GIT_URLS.redact(url)!r} {why}; use https://host/owner/repo.git, git@host:owner/repo.git "
                "or file:///path"
            )
        return url

    @checks("commit")
    def _commit_is_full_sha(cls, commit: str) -> str:
        if FULL_SHA.match(commit) or commit == "":
            return commit
        if HEX.match(commit) and len(commit) < 40:
            raise ValueError(
                f"{commit!r} is a short SHA ({len(commit)} hex digits); pins need the full "
                "40-digit commit so the source can be verified. Find it with "
                "`git rev-parse <short>` or `pants run rules:update-pins`"
            )
        if HEX.match(commit) or len(commit) == 40:
            raise ValueError(
                f"{commit!r} is not a commit SHA (40 lowercase hex digits); copy the full SHA "
                "from `git log` or run `pants run rules:update-pins`"
            )
        raise ValueError(
            f"{commit!r} looks like a branch or tag name; `commit` must be a full 40-digit "
            "SHA (put the branch in `track` and run `pants run rules:update-pins`)"
        )


def parse_tables(
    path: str, text: str, model: Type[M], needs: str, describe: Callable[[FieldProblem], str], prefix: str = ""
) -> Dict[str, M]:
    """Each top-level table of a TOML pins file as `model`; errors name file, table, field."""
    return model_tables(path, load_toml(path, text), model, needs, describe, prefix)


def load_toml(path: str, text: str) -> Dict:
    try:
        return toml.loads(text)
    except toml.TomlDecodeError as e:
        raise PinsError(f"{path}: TOML syntax error at line {e.lineno}, column {e.colno}: {e.msg}")
    except (IndexError, OverflowError):
        # toml 0.10 fails so on some malformed files (a stray `\r` at the end, `/b\t.`, a `\U`
        # escape of more than 8 hex digits' worth): found by tests/fuzz/fuzz_pins.py. Still a
        # syntax error of the file, not a crash of the build.
        raise PinsError(
            f"{path}: TOML syntax error the parser cannot place; check quotes, brackets, stray "
            "characters and line endings (`\\r` without `\\n`)"
        ) from None


def check_pin_name(name: str, where: str) -> str:
    """`name` if it matches PIN_NAME, else PinsError naming `where` and the pattern."""
    if not isinstance(name, str) or not PIN_NAME.match(name):
        raise PinsError(
            f"{where}: {name!r} is not a pin name: letters, digits, `.`, `_` and `-`, starting with a letter or digit, "
            "at most 100 (it is a directory's name, work/<pin>/ and patches/<pin>/); rename the table"
        )
    return name


def pin_path(root: str, name: str, where: str, prefix: str = "") -> str:
    """`root/<prefix><name>`, for a path made of a pin's name (a checkout, a patch set's
    directory): the name checked, and the path resolved and kept inside `root`."""
    check_pin_name(name, where)
    path = os.path.join(root, prefix + name)
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
        raise PinsError(f"{where}: {path} resolves outside {root} (a symbolic link there?); remove the link")
    return path


def model_tables(
    path: str, raw: Mapping, model: Type[M], needs: str, describe: Callable[[FieldProblem], str], prefix: str = ""
) -> Dict[str, M]:
    """Each table of an already parsed TOML document (or of one of its tables) as `model`."""
    tables: Dict[str, M] = {}
    for name, table in raw.items():
        check_pin_name(name, f"{path}: [{prefix}{name}]")
        if not isinstance(table, Mapping):
            raise PinsError(f"{path}: `{prefix}{name}` must be a table like [{prefix}{name}] with {needs}")
        try:
            tables[name] = model(**table)
        except ValidationError as e:
            problems = "; ".join(
                f"field `{problem.field}`: {describe(problem)}{_did_you_mean(problem, model)}"
                for problem in field_problems(e)
            )
            raise PinsError(f"{path}: [{prefix}{name}] {problems}") from None
    return tables


def _did_you_mean(problem: FieldProblem, model: Type[PinModel]) -> str:
    if problem.kind != UNKNOWN:
        return ""
    close = difflib.get_close_matches(problem.field.split(".")[-1], field_names(model), n=1)
    return f". Did you mean `{close[0]}`?" if close else ""


PREBUILT = "prebuilt"  # [prebuilt.<name>] tables: pinned wheels from an index, not git pins
# Keys of [prebuilt] itself: defaults for every [prebuilt.<name>] table (one index URL, the stream
# chosen there, for all of TheRock's wheels).
PREBUILT_SHARED = ("index_url", "python")
# TheRock's device wheels: `<prefix>-device-<bundle>`, e.g. amd-torch-device-gfx1151 (a target),
# amd-torch-device-gfx115x (a family); rocm_bootstrap.device_dist_name writes a bundle's `_` as `-`.
DEVICE_PROJECT = re.compile(r"^[a-z0-9][a-z0-9._-]*-device-(gfx[0-9a-z-]+)$")


class PrebuiltPin(PinModel):
    """A wheel from a PEP 503/691 index, pinned by file name and sha256. A host pin follows
    `track` (a version specifier); a device pin (`device_of`, TheRock's `amd-torch-device-<gfx>`
    wheels) takes exactly its host's version. Empty version/file/sha256: not resolved yet."""

    index_url: str
    project: str
    python: str  # the wheel's Python, e.g. "3.12": update-pins picks files for it
    track: str = ""  # host pins only
    device_of: str = ""  # device pins: the [prebuilt.<name>] of the host wheel it carries GPU code for
    version: str = ""
    file: str = ""
    sha256: str = ""
    # Read by update-pins from the wheel's metadata: the `rocm==X` a host requires, the
    # `rocm-sdk-device-<gfx>==X` a device wheel requires.
    requires_rocm: str = ""
    # Device pins, read by update-pins: the host's extra that pulls this wheel ("device-gfx1151";
    # "" for a family wheel, which only other device wheels pull) and the other device wheels
    # this one requires (space-separated projects, e.g. its family wheel).
    extra: str = ""
    requires_devices: str = ""
    # Host pins: "vllm:requirements/build/rocm.txt#torch", the requirement line of another pin's
    # tree whose `==` version this wheel must be; update-pins sets `track` from it and the
    # preflight checks the pairing (upstream/recipe_values.py).
    derived_from: str = ""

    @checks("index_url")
    def _index_url(cls, url: str) -> str:
        return checked_download_url(url, "an index URL: https://host/simple/ or file:///path").rstrip("/") + "/"

    _sha256 = checks("sha256")(lambda cls, sha256: checked_sha256(sha256))

    @property
    def resolved(self) -> bool:
        return bool(self.version and self.file and self.sha256)

    @property
    def device_key(self) -> str:
        """The bundle a device pin's wheel carries code for ("gfx1151", "gfx115x"); "" for a host."""
        found = DEVICE_PROJECT.match(self.project) if self.device_of else None
        return found.group(1) if found else ""


def parse_pins(path: str, text: str) -> Dict[str, Pin]:
    git_pins = {k: v for k, v in load_toml(path, text).items() if k != PREBUILT}
    return model_tables(path, git_pins, Pin, "url, track and commit", _describe)


def parse_prebuilt_pins(path: str, text: str) -> Dict[str, PrebuiltPin]:
    raw = dict(load_toml(path, text).get(PREBUILT, {}))
    shared = {k: raw.pop(k) for k in PREBUILT_SHARED if k in raw and not isinstance(raw[k], Mapping)}
    for key, value in raw.items():
        if not isinstance(value, Mapping):
            raise PinsError(
                f"{path}: [{PREBUILT}] key `{key}`: only {' and '.join(PREBUILT_SHARED)} may be set for every "
                f"prebuilt pin; a pin is a table [{PREBUILT}.<name>] with index_url, project, track and python"
            )
    tables = {}
    for name, table in raw.items():  # index and Python: the table's, else its host's, else [prebuilt]'s
        device_of = table.get("device_of")
        host = raw.get(device_of, {}) if isinstance(device_of, str) else {}
        tables[name] = {**shared, **{k: host[k] for k in PREBUILT_SHARED if k in host}, **table}
    pins = model_tables(path, tables, PrebuiltPin, "index_url, project, track and python", _describe_prebuilt, prefix=f"{PREBUILT}.")
    for name, pin in pins.items():
        problem = _host_problem(pin, pins) if pin.device_of else _device_fields_on_host(pin)
        if problem:
            raise PinsError(f"{path}: [{PREBUILT}.{name}] {problem}")
    return pins


def _device_fields_on_host(pin: PrebuiltPin) -> Optional[str]:
    if not pin.track:
        return (
            "field `track`: missing (a host pin needs a version specifier such as \"==2.13.0+rocm10.0.0\" "
            "or \">=2.13,<2.14\"; a device pin names its host with `device_of` instead)"
        )
    stray = [k for k in ("extra", "requires_devices") if getattr(pin, k)]
    if stray:
        return f"field `{stray[0]}`: only a device pin (one with `device_of`) has it; remove it or add `device_of`"
    return None


def _host_problem(pin: PrebuiltPin, pins: Mapping[str, PrebuiltPin]) -> Optional[str]:
    """A device pin against its host: named, a host itself, same Python, same version."""
    host = pins.get(pin.device_of)
    if host is None or host.device_of:
        hosts = ", ".join(sorted(n for n, p in pins.items() if not p.device_of)) or "none"
        why = "is not a [prebuilt.*] table" if host is None else "is a device pin itself"
        return f"field `device_of`: {pin.device_of!r} {why}; name the host wheel's pin (host pins: {hosts})"
    if pin.track or pin.derived_from:
        field = "track" if pin.track else "derived_from"
        return f"field `{field}`: a device pin takes exactly its host's version (device_of = {pin.device_of!r}); remove `{field}`"
    if not DEVICE_PROJECT.match(pin.project):
        return (
            f"field `project`: {pin.project!r} is not a device wheel's name; expected `<prefix>-device-<gfx>` "
            f"as TheRock names them, e.g. \"amd-{host.project}-device-gfx1151\""
        )
    if pin.python != host.python:
        return f"field `python`: {pin.python!r}, but its host [{PREBUILT}.{pin.device_of}] is for {host.python!r}; both must match"
    if pin.version and host.version and pin.version != host.version:
        return (
            f"field `version`: {pin.version!r} differs from its host [{PREBUILT}.{pin.device_of}]'s {host.version!r}; a "
            f"device wheel is built for exactly one host version: run `pants run rules:update-pins -- --only {pin.device_of}`"
        )
    return None


def _describe_prebuilt(problem: FieldProblem) -> str:
    if problem.kind == MISSING:
        return (
            "missing (every prebuilt pin needs index_url, project and python, which [prebuilt] or a device pin's "
            "host may give; a host pin also track, a device pin device_of)"
        )
    if problem.kind == UNKNOWN:
        return f"unknown field (allowed: {', '.join(field_names(PrebuiltPin))})"
    return problem.message


def _describe(problem: FieldProblem) -> str:
    if problem.kind == MISSING:
        return "missing (every pin needs url and track; `pants run rules:update-pins` fills its commit)"
    if problem.kind == UNKNOWN:
        return "unknown field (allowed: url, track, commit, submodules, derived_from)"
    return problem.message


def update_pins_command(name: str, path: str) -> str:
    """The command that moves (or fills) the pin `name` of the pins file or directory `path`."""
    pins_file = "" if path.rstrip("/") == "components/pins" else f"--pins-file {path} "
    return f"pants run rules:update-pins -- {pins_file}--only {name}"


def lookup_pin(pins: Mapping[str, Pin], name: str, path: str, owner: str) -> Pin:
    """The pin `name`, ready to fetch: there, and with its commit."""
    try:
        pin = pins[name]
    except KeyError:
        known = ", ".join(sorted(pins)) or "none"
        raise PinsError(
            f"{owner}: pin `{name}` is not in {path} (known pins: {known}); add a [{name}] "
            "table with url and track (`update-pins` fills its commit), or fix the `pin` field"
        ) from None
    if not pin.commit:
        raise PinsError(
            f"{owner}: pin `{name}` in {path} has no `commit` yet; fill it from its url and track "
            f"({pin.track!r}): {update_pins_command(name, path)}"
        )
    return pin
