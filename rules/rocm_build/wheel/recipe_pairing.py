"""The preflight's exact pairing: a pin derived from a recipe line (`derived_from =
"vllm:docker/Dockerfile.rocm_base#PYTORCH_BRANCH"`) must be what that line says at the source
pin's commit, not a version a CMake minimum would accept. A disagreement names both places:
the pins file's table and the recipe's file and line.

The recipe is read from the source pin's own tree as upstream wrote it (fetched by commit, as a
build would; our patches to it are not the recipe).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from pants.engine.fs import Digest, DigestContents
from pants.engine.rules import Get, collect_rules, rule

from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.pins import FULL_SHA, HEX, Pin
from rocm_build.upstream.pins_file import load_pins
from rocm_build.upstream.recipe_values import RecipeValue, recipe_value, split_spec
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest
from rocm_build.upstream.upstream_repo import UpstreamSpec


@dataclass(frozen=True)
class RecipePairingRequest:
    upstream: UpstreamSpec
    owner: str


@dataclass(frozen=True)
class RecipePairing:
    problems: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()


def agrees(pin: Pin, line: RecipeValue) -> bool:
    """A SHA (full or short) the commit starts with; a tag or branch, the pin's `track`
    (update-pins writes the ref there when it resolves it)."""
    if HEX.match(line.value) and (FULL_SHA.match(line.value) or 7 <= len(line.value) < 40):
        return pin.commit.startswith(line.value.lower())
    return pin.track == line.value


@rule(desc="Checking a pin against the recipe line it is derived from")
async def check_recipe_pairing(request: RecipePairingRequest) -> RecipePairing:
    upstream, owner = request.upstream, request.owner
    pin = upstream.pin
    if "#" not in (pin.derived_from or ""):
        return RecipePairing()
    source_name, path, key = split_spec(pin.derived_from or "")
    table = f"[{upstream.pin_name}] in {upstream.pins_file}"
    source = dict((await load_pins(upstream.pins_file, owner)).pins).get(source_name)
    if source is None:
        return RecipePairing((f"{owner}: {table} is derived from `{source_name}`, which is not a pin of that file",))
    fetched = await Get(FetchedTree, FetchRequest(source.url, source.commit, False, source_name, upstream.pins_file, owner))
    read = await Get(CheckedOut, CheckoutRequest(fetched.pack, owner, "read", (path,)))
    texts = {fc.path[len(TREE_DIR) + 1 :]: fc.content.decode(errors="replace") for fc in await Get(DigestContents, Digest, read.digest)}
    where = f"{source_name} at {source.commit[:12]}"
    line = recipe_value(path, texts[path], key) if path in texts else None
    if line is None:
        return RecipePairing((f"{owner}: {table} is derived from {path} of {where}, which does not set {key}",))
    if not agrees(pin, line):
        return RecipePairing((
            f"{owner}: {table} pins {pin.url} at {pin.commit[:12]} (track {pin.track!r}), but {line.where(where)} "
            f"names {line.value}: the chain is not the one the recipe builds. Fix: `pants run rules:update-pins "
            f"-- --only {source_name}` sets it from the recipe",
        ))  # fmt: skip
    return RecipePairing(notes=(f"{upstream.pin_name} {pin.commit[:12]} is what {line.where(where)} names",))


def rules():
    return collect_rules()
