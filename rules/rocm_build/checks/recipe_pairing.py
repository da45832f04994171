"""The preflight's exact pairing: a pin derived from a recipe line (`derived_from =
"vllm:docker/Dockerfile.rocm_base#PYTORCH_BRANCH"`) must be what that line says at the source
pin's commit, not a version a CMake minimum would accept. A disagreement names both places:
the pins file's table and the recipe's file and line.

The recipe is read from the source pin's own tree as upstream wrote it (fetched by commit, as a
build would; our patches to it are not the recipe).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion
from pants.engine.fs import Digest, DigestContents
from pants.util.logging import LogLevel
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import TreeCheckRequest, Findings
from rocm_build.pins.load import load_pins
from rocm_build.pins.tables import FULL_SHA, PREBUILT, SHORT_SHA
from rocm_build.prebuilt import wheel_rules as prebuilt_rules
from rocm_build.prebuilt.wheel_rules import PrebuiltRequest, PrebuiltSpec
from rocm_build.upstream import fetch, source_tree
from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.recipe_values import RecipeValue, recipe_value, split_spec
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest
from rocm_build.upstream.upstream_repo import UpstreamSpec
from rocm_build.wheel.build_spec import WheelBuildSpec


@dataclass(frozen=True)
class RecipePairingRequest:
    """A pin derived from a recipe line: a git pin (`commit`, `track`) or a prebuilt host pin
    (`version`, `track`), as the table of `pins_file` writes it."""

    pins_file: str
    table: str  # "[torch]", "[prebuilt.therock-torch]"
    derived_from: str
    owner: str
    pinned: str  # the pin as a message shows it
    commit: str = ""
    track: str = ""
    version: str = ""


@dataclass(frozen=True)
class RecipePairing:
    problems: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()


def git_pin_pairing(upstream: UpstreamSpec, owner: str) -> Optional[RecipePairingRequest]:
    pin = upstream.pin
    if "#" not in (pin.derived_from or ""):
        return None
    pinned = f"{pin.url} at {pin.commit[:12]} (track {pin.track!r})"
    return RecipePairingRequest(upstream.pins_file, f"[{upstream.pin_name}]", pin.derived_from or "", owner, pinned, pin.commit, pin.track)


def prebuilt_pin_pairing(prebuilt: PrebuiltSpec, owner: str) -> Optional[RecipePairingRequest]:
    pin = prebuilt.pin
    if not pin.derived_from:
        return None
    pinned = f"{pin.project} {pin.version or '(not resolved)'} (track {pin.track!r})"
    return RecipePairingRequest(prebuilt.pins_file, f"[{PREBUILT}.{prebuilt.pin_name}]", pin.derived_from, owner, pinned, track=pin.track, version=pin.version)


def agrees(request: RecipePairingRequest, line: RecipeValue) -> bool:
    """A git pin: the SHA (full or short) its commit starts with, or, for a tag or branch, its
    `track` (update-pins writes the ref there). A prebuilt pin: the `==` version it is pinned at
    (or tracks, while not resolved)."""
    if not request.commit:  # `==X` as pip reads it: 2.12 is 2.12.0, and X matches X+local
        try:
            exact = SpecifierSet(f"=={line.value}")
            return exact.contains(request.version, prereleases=True) if request.version else request.track == f"=={line.value}"
        except (InvalidSpecifier, InvalidVersion):
            return request.version == line.value
    if FULL_SHA.match(line.value) or SHORT_SHA.match(line.value.lower()):
        return request.commit.startswith(line.value.lower())
    return request.track == line.value


@rule(desc="Checking a pin against the recipe line it is derived from")
async def check_recipe_pairing(request: RecipePairingRequest) -> RecipePairing:
    owner = request.owner
    source_name, path, key = split_spec(request.derived_from)
    table = f"{request.table} in {request.pins_file}"
    source = dict((await load_pins(request.pins_file, owner)).pins).get(source_name)
    if source is None:
        return RecipePairing((f"{owner}: {table} is derived from `{source_name}`, which is not a pin of that file",))
    fetched = await Get(FetchedTree, FetchRequest(source.url, source.commit, False, source_name, request.pins_file, owner))
    read = await Get(CheckedOut, CheckoutRequest(fetched.pack, owner, "read", (path,)))
    texts = {fc.path[len(TREE_DIR) + 1 :]: fc.content.decode(errors="replace") for fc in await Get(DigestContents, Digest, read.digest)}
    where = f"{source_name} at {source.commit[:12]}"
    line = recipe_value(path, texts[path], key) if path in texts else None
    if line is None:
        return RecipePairing((f"{owner}: {table} is derived from {path} of {where}, which does not set {key}",))
    if not agrees(request, line):
        return RecipePairing((
            f"{owner}: {table} pins {request.pinned}, but {line.where(where)} names {line.value}: the chain is not "
            f"the one the recipe builds. Fix: `pants run rules:update-pins -- --only {source_name}` sets it from the recipe",
        ))  # fmt: skip
    pinned_at = request.commit[:12] if request.commit else (request.version or request.track)
    return RecipePairing(notes=(f"{request.table[1:-1]} {pinned_at} is what {line.where(where)} names",))


@dataclass(frozen=True)
class ComponentPairingRequest:
    """A component's git pin, and the prebuilt host pins it builds on, against the recipe lines
    they are derived from: one RecipePairing for all of them."""

    spec: WheelBuildSpec


@rule(desc="Checking a component's pins against the recipe lines they are derived from")
async def check_component_pairing(request: ComponentPairingRequest) -> RecipePairing:
    spec = request.spec
    prebuilt = await MultiGet(Get(PrebuiltSpec, PrebuiltRequest(a, f"the `dependencies` field of {spec.owner}")) for a in spec.prebuilt)
    requests = [git_pin_pairing(spec.upstream, spec.owner), *(prebuilt_pin_pairing(p, spec.owner) for p in prebuilt)]
    found = await MultiGet(Get(RecipePairing, RecipePairingRequest, r) for r in requests if r is not None)
    return RecipePairing(tuple(p for f in found for p in f.problems), tuple(n for f in found for n in f.notes))


class PairingCheck(TreeCheckRequest):
    pass


@rule(desc="Checking a rocm_wheel's pins against its recipe", level=LogLevel.DEBUG)
async def check_pairing(request: PairingCheck) -> Findings:
    """Tree check: the recipe and the pin agree (what pairs them, above)."""
    spec = request.spec
    pairing = await Get(RecipePairing, ComponentPairingRequest(spec))
    return Findings(tuple(pairing.problems), tuple(pairing.notes))


@memoized
def rules():
    return FrozenOrderedSet([*collect_rules(), *fetch.rules(), *prebuilt_rules.rules(), *source_tree.rules()])
