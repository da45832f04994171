"""Tree check: every file the recipe names (its requirement files, the project its wheel command
builds, the files its build steps run) is in the patched tree, and no build step pip-installs
cmake (it would come before the system cmake on PATH; the build refuses it, seed 000)."""

from __future__ import annotations

import re
from typing import List

from pants.engine.rules import collect_rules, rule
from pants.util.logging import LogLevel
from pants.util.memo import memoized
from pants.util.ordered_set import FrozenOrderedSet

from rocm_build.checks.findings import TreeCheckRequest, Findings
from rocm_build.upstream.source_tree import source_files
from rocm_build.wheel.build_spec import WheelBuildSpec
from rocm_build.wheel.recipe_paths import PROJECT_FILES, missing_paths, named_paths
from rocm_build.upstream import source_tree

PIP_INSTALLS_CMAKE = re.compile(r"\bpip3?\b.*\binstall\b.*(?<![\w.-])cmake(?![\w.-])")


class RecipeFilesCheck(TreeCheckRequest):
    pass


@rule(desc="Checking the files a rocm_wheel's recipe names", level=LogLevel.DEBUG)
async def check_recipe_files(request: RecipeFilesCheck) -> Findings:
    spec, tree = request.spec, request.tree
    named = named_paths(spec.requirements, spec.steps, spec.wheel_command)
    candidates = tuple(dict.fromkeys(c for p in named for c in p.candidates()))
    found = await source_files(tree.upstream.source, candidates, spec.owner)
    present = [path for path, content in found.items() if content is not None]
    return Findings((*_missing_files(spec, present, tree.where), *_pip_cmake_steps(spec)))


def _missing_files(spec: WheelBuildSpec, present: List[str], where: str) -> List[str]:
    named = named_paths(spec.requirements, spec.steps, spec.wheel_command)
    problems = []
    for p in missing_paths(named, present):
        what = f"{p.path or 'the tree root'} has no {' or '.join(PROJECT_FILES)}" if p.is_project else f"{p.path} is not in the tree"
        problems.append(
            f"{spec.owner}: {what} of {where} (patched), but its {p.named_by} needs it. Fix the recipe "
            f"in {spec.address.spec_path}/BUILD (upstream may have moved the file), or move the pin to a "
            "commit that has it."
        )
    return problems


def _pip_cmake_steps(spec: WheelBuildSpec) -> List[str]:
    return [
        f"{spec.owner}: build_command `{step}` pip-installs cmake, which would come before the system "
        "cmake on PATH (the build refuses it: builds use the system's cmake, which belongs with the toolchain). Remove it."
        for step in spec.steps
        if PIP_INSTALLS_CMAKE.search(step)
    ]


@memoized
def rules():
    return FrozenOrderedSet([
        *collect_rules(),
        *source_tree.rules(),
    ])
