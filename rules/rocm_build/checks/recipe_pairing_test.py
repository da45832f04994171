"""checks/recipe_pairing.py: a pin derived from a recipe line is checked against that line as the
source pin's own tree writes it; agreement is a note naming the line, a disagreement a problem
naming the pins file's table, the recipe's file and line, and update-pins as the fix.
tests/e2e/preflight_test.py's test_a_pin_derived_from_a_recipe_line_must_be_what_the_line_names,
at the rule (its git pin and its prebuilt pin, both ways)."""

from __future__ import annotations

from typing import Any, Dict

from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents, FileContent, PathGlobs

from rocm_build.checks.findings import Findings
from rocm_build.checks.recipe_pairing import (
    ComponentPairingRequest, PairingCheck, RecipePairing, RecipePairingRequest, agrees, check_component_pairing, check_pairing,
    check_recipe_pairing, git_pin_pairing,
)  # fmt: skip
from rocm_build.pins.tables import PrebuiltPin
from rocm_build.prebuilt.wheel_rules import PrebuiltSpec
from rocm_build.testutil.engine import drive
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.testutil.specs import COMMIT, upstream_spec, wheel_spec
from rocm_build.upstream.fetch import TREE_DIR, FetchedTree, FetchRequest
from rocm_build.upstream.recipe_values import RecipeValue
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest

PINS = "tests/mini/pins"
FA = "fedcba9876543210fedcba9876543210fedcba98"
FA_URL = "https://example.invalid/flash_attention.git"
RECIPE = "docker/Dockerfile.rocm_base"
REQUIREMENTS = "requirements/rocm.txt"
OWNER = "tests/mini/torch:wheel"
PACK, READ = Digest("1" * 64, 1), Digest("3" * 64, 3)  # stand-ins the rule passes on


def pair(request: RecipePairingRequest, recipe: Dict[str, str]):
    """The pairing, the source pin's tree holding the files of `recipe`."""

    def answer(output_type: type, asked: Any) -> Any:
        if isinstance(asked, PathGlobs):  # the pins file
            text = pins_toml(**{"mini-flash_attention": {"url": FA_URL, "track": "main", "commit": FA}})
            return DigestContents([FileContent(f"{PINS}/mini-flash_attention.toml", text.encode())])
        if output_type is FetchedTree:
            return FetchedTree(PACK, 0)
        if output_type is CheckedOut:
            return CheckedOut(READ, tuple((p, p) for p in asked.paths if p in recipe))
        return DigestContents([FileContent(f"{TREE_DIR}/{p}", t.encode()) for p, t in recipe.items()])

    return drive(check_recipe_pairing(request), answer)


def git_request(derived_from: str = f"mini-flash_attention:{RECIPE}#PYTORCH_BRANCH") -> RecipePairingRequest:
    return RecipePairingRequest(PINS, "[mini-torch]", derived_from, OWNER, f"https://example.invalid/torch.git at {COMMIT[:12]} (track 'main')", COMMIT, "main")


def sdk_request(version: str) -> RecipePairingRequest:
    return RecipePairingRequest(
        PINS, "[prebuilt.mini-sdk]", f"mini-flash_attention:{REQUIREMENTS}#mini-rocm-sdk-core", OWNER,
        f"mini-rocm-sdk-core {version} (track '=={version}')", track=f"=={version}", version=version,
    )  # fmt: skip


def test_a_git_pin_the_recipe_line_names_is_a_note_naming_the_line() -> None:
    found, asked = pair(git_request(), {RECIPE: f'ARG PYTORCH_BRANCH="{COMMIT[:7]}" # release\n'})
    assert found.problems == ()
    assert found.notes == (
        f"mini-torch {COMMIT[:12]} is what {RECIPE} line 1 of mini-flash_attention at {FA[:12]} "
        f'(`ARG PYTORCH_BRANCH="{COMMIT[:7]}" # release`) names',
    )
    # The recipe is the source pin's own tree, fetched by its commit: our patches are not the recipe.
    assert (FetchedTree, FetchRequest(FA_URL, FA, False, "mini-flash_attention", PINS, OWNER)) in asked
    assert (CheckedOut, CheckoutRequest(PACK, OWNER, "read", (RECIPE,))) in asked


def test_a_git_pin_the_recipe_moved_away_from_names_both_places_and_the_fix() -> None:
    found, _ = pair(git_request(), {RECIPE: 'ARG PYTORCH_BRANCH="0123abd"\n'})
    assert found.problems == (
        f"{OWNER}: [mini-torch] in {PINS} pins https://example.invalid/torch.git at {COMMIT[:12]} (track 'main'), "
        f"but {RECIPE} line 1 of mini-flash_attention at {FA[:12]} (`ARG PYTORCH_BRANCH=\"0123abd\"`) names 0123abd: "
        "the chain is not the one the recipe builds. Fix: `pants run rules:update-pins -- --only mini-flash_attention` "
        "sets it from the recipe",
    )


def test_a_prebuilt_pin_is_held_to_the_version_the_requirement_line_pins() -> None:
    recipe = {REQUIREMENTS: "mini-rocm-sdk-core==1.0.0\n"}
    ok, _ = pair(sdk_request("1.0.0"), recipe)
    assert ok.notes == (f"prebuilt.mini-sdk 1.0.0 is what {REQUIREMENTS} line 1 of mini-flash_attention at {FA[:12]} (`mini-rocm-sdk-core==1.0.0`) names",)
    moved, _ = pair(sdk_request("1.0.0"), {REQUIREMENTS: "mini-rocm-sdk-core==1.0.1\n"})
    assert moved.problems == (
        f"{OWNER}: [prebuilt.mini-sdk] in {PINS} pins mini-rocm-sdk-core 1.0.0 (track '==1.0.0'), but "
        f"{REQUIREMENTS} line 1 of mini-flash_attention at {FA[:12]} (`mini-rocm-sdk-core==1.0.1`) names 1.0.1: "
        "the chain is not the one the recipe builds. Fix: `pants run rules:update-pins -- --only mini-flash_attention` "
        "sets it from the recipe",
    )


def test_a_source_that_is_not_a_pin_and_a_line_that_is_not_there() -> None:
    missing, asked = pair(git_request("mini-vllm:Dockerfile#PYTORCH_BRANCH"), {})
    assert missing.problems == (f"{OWNER}: [mini-torch] in {PINS} is derived from `mini-vllm`, which is not a pin of that file",)
    assert [t for t, _ in asked] == [DigestContents]  # nothing fetched for it
    unset, _ = pair(git_request(), {RECIPE: "ARG OTHER=1\n"})
    assert unset.problems == (
        f"{OWNER}: [mini-torch] in {PINS} is derived from {RECIPE} of mini-flash_attention at {FA[:12]}, which does not set PYTORCH_BRANCH",
    )


def line(value: str) -> RecipeValue:
    return RecipeValue(RECIPE, 1, "PYTORCH_BRANCH", value, f"ARG PYTORCH_BRANCH={value}")


def test_what_agrees_with_a_line() -> None:
    git = git_request()
    assert agrees(git, line(COMMIT)) and agrees(git, line(COMMIT[:7].upper()))
    assert not agrees(git, line("0123abd"))
    # A tag or branch: the ref update-pins wrote as `track`.
    assert agrees(git, line("main")) and not agrees(git, line("release/2.9"))
    # A prebuilt pin: `==` as pip reads it (2.12 is 2.12.0, a local version matches its release).
    assert agrees(sdk_request("2.12.0+rocm7.14.0"), line("2.12"))
    assert not agrees(sdk_request("2.12.1"), line("2.12"))


def test_only_a_pin_derived_from_one_line_is_paired() -> None:
    whole_file = upstream_spec(derived_from="torch:cmake/External/aotriton.cmake")
    assert git_pin_pairing(whole_file, OWNER) is None
    one_line = git_pin_pairing(upstream_spec(derived_from=f"mini-flash_attention:{RECIPE}#PYTORCH_BRANCH"), OWNER)
    assert one_line is not None and (one_line.table, one_line.pins_file, one_line.commit) == ("[mini-torch]", "components/pins/mini.toml", COMMIT)


def test_a_component_pairs_its_git_pin_and_each_derived_prebuilt_pin_in_one_result() -> None:
    sdk = PrebuiltSpec(
        Address("tests/mini/sdk", target_name="core"), "mini-sdk",
        PrebuiltPin(index_url="https://example.invalid/simple/", project="mini-rocm-sdk-core", python="3.11", track="==1.0.0",
                    derived_from=f"mini-flash_attention:{REQUIREMENTS}#mini-rocm-sdk-core"),
        PINS,
    )  # fmt: skip
    plain = PrebuiltSpec(Address("tests/mini/sdk", target_name="other"), "other", PrebuiltPin(index_url="https://example.invalid/simple/", project="other", python="3.11"), PINS)
    spec = wheel_spec(upstream=upstream_spec(derived_from=f"mini-flash_attention:{RECIPE}#PYTORCH_BRANCH"), prebuilt=(sdk.address, plain.address))
    found = {"[mini-torch]": RecipePairing(notes=("torch paired",)), "[prebuilt.mini-sdk]": RecipePairing(("sdk moved",))}

    def answer(output_type: type, request: Any) -> Any:
        if output_type is PrebuiltSpec:
            assert request.description_of_origin == f"the `dependencies` field of {OWNER}"
            return {sdk.address: sdk, plain.address: plain}[request.address]
        return found[request.table]

    pairing, asked = drive(check_component_pairing(ComponentPairingRequest(spec)), answer)
    # Only the pins derived from a line are paired: the plain prebuilt pin is not.
    assert [r.table for t, r in asked if t is RecipePairing] == ["[mini-torch]", "[prebuilt.mini-sdk]"]
    assert pairing == RecipePairing(("sdk moved",), ("torch paired",))
    findings, _ = drive(check_pairing(PairingCheck(spec, None)), lambda t, r: pairing)
    assert findings == Findings(("sdk moved",), ("torch paired",))
