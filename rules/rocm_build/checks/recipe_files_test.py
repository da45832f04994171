"""checks/recipe_files.py: the files a recipe names are read from the patched tree (the files our
patches wrote first, the rest from the pack), and each one missing is a problem naming the words
that need it and the fix; a step that pip-installs cmake is refused.
tests/e2e/preflight_test.py's test_a_file_the_recipe_names_but_the_pin_lacks, at the rule."""

from __future__ import annotations

from typing import Any, Dict, List

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST, Digest, DigestContents, FileContent

from rocm_build.checks.findings import TreeUnderCheck
from rocm_build.checks.recipe_files import RecipeFilesCheck, check_recipe_files
from rocm_build.testutil.engine import drive
from rocm_build.testutil.specs import COMMIT, upstream_spec, wheel_spec
from rocm_build.upstream.fetch import TREE_DIR
from rocm_build.upstream.source_tree import CheckedOut, CheckoutRequest, SourceTree
from rocm_build.upstream.upstream_repo import ResolvedUpstream

WHERE = f"mini-torch at {COMMIT}"
PACK = Digest("1" * 64, 1)  # stand-ins: the rule passes them on, never reads them
CHANGES = Digest("2" * 64, 2)
READ = Digest("3" * 64, 3)


def tree(touched=()) -> TreeUnderCheck:
    spec = upstream_spec()
    source = SourceTree(PACK, CHANGES, tuple(touched))
    return TreeUnderCheck(ResolvedUpstream(spec.address, spec.pin_name, spec.pin, (), source, "", 0), WHERE)


def check(pack_files: List[str], patched: List[str] = (), **spec: Any):
    """The check of a tree whose pack has `pack_files` and whose patches wrote `patched`."""

    def answer(output_type: type, request: Any) -> Any:
        if output_type is CheckedOut:
            return CheckedOut(READ, tuple((p, p) for p in request.paths if p in pack_files))
        digest_files: Dict[Digest, List[str]] = {READ: list(pack_files), CHANGES: list(patched)}
        return DigestContents(FileContent(f"{TREE_DIR}/{p}", b"") for p in digest_files[request])

    return drive(check_recipe_files(RecipeFilesCheck(wheel_spec(**spec), tree(patched))), answer)


def test_a_script_the_pin_lacks_names_the_step_the_build_file_and_the_fix() -> None:
    found, asked = check(["setup.py"], steps=("python tools/amd_build/build_amd.py",))
    assert found.problems == (
        f"tests/mini/torch:wheel: tools/amd_build/build_amd.py is not in the tree of {WHERE} (patched), but its "
        "build_command `python tools/amd_build/build_amd.py` needs it. Fix the recipe in tests/mini/torch/BUILD "
        "(upstream may have moved the file), or move the pin to a commit that has it.",
    )
    # Only the files the recipe names are read, each once: the script and the project's two.
    assert asked[0] == (
        CheckedOut,
        CheckoutRequest(PACK, "tests/mini/torch:wheel", "read", ("tools/amd_build/build_amd.py", "setup.py", "pyproject.toml")),
    )


def test_a_project_without_setup_or_pyproject_and_a_missing_requirement_file() -> None:
    found, _ = check([], requirements=("-r requirements/build.txt",), steps=("cd python",))
    assert found.problems == (
        f"tests/mini/torch:wheel: requirements/build.txt is not in the tree of {WHERE} (patched), but its "
        "build_requirements `-r requirements/build.txt` needs it. Fix the recipe in tests/mini/torch/BUILD "
        "(upstream may have moved the file), or move the pin to a commit that has it.",
        f"tests/mini/torch:wheel: python has no setup.py or pyproject.toml of {WHERE} (patched), but its "
        "wheel_command `pip wheel --no-deps --no-build-isolation -w dist .` needs it. Fix the recipe in "
        "tests/mini/torch/BUILD (upstream may have moved the file), or move the pin to a commit that has it.",
    )


def test_a_file_a_patch_adds_is_found_without_reading_the_pack_for_it() -> None:
    found, asked = check(["pyproject.toml"], patched=["build.sh"], steps=("bash build.sh",))
    assert found.problems == ()
    assert [r.paths for t, r in asked if t is CheckedOut] == [("setup.py", "pyproject.toml")]


def test_a_step_that_pip_installs_cmake_is_refused() -> None:
    steps = ("pip install cmake==3.31.6", "python3 -m pip install -U cmake", "pip install cmake-format", "pip install scikit-build-core")
    found, _ = check(["setup.py"], steps=steps)
    assert found.problems == tuple(
        f"tests/mini/torch:wheel: build_command `{step}` pip-installs cmake, which would come before the system "
        "cmake on PATH (the build refuses it: builds use the system's cmake, which belongs with the toolchain). Remove it."
        for step in steps[:2]
    )
