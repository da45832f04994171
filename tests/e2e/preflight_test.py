"""`pants rocm-plan --check`: every problem found in seconds, before any compile; `package`
stops the same way. The cases share one copy (its pantsd and store), put back after each; those
that build a wheel come last, so before them the store holds none and "nothing was built" is
real. The case that proves "before any fetch" comes first: the others fetch."""

from __future__ import annotations

import json
import subprocess
import time
import zipfile

import pytest

from e2e.workspace import Workspace, file_copy
from mini import make_upstreams

VLLM = "tests/mini/vllm:wheel"
TORCH_BUILD = "tests/mini/torch/BUILD"
AOT_BUILD = "tests/mini/aotriton/BUILD"
SYSTEM_CMAKE = subprocess.run(["cmake", "--version"], capture_output=True, text=True).stdout.splitlines()[0]


@pytest.fixture(scope="module")
def shared_ws(tmp_path_factory):
    with file_copy(tmp_path_factory, "preflight") as copy:
        yield copy


def check(ws: Workspace):
    return ws.pants("rocm-plan", "--check", VLLM)


def assert_nothing_built(ws: Workspace, run) -> None:
    assert "Building rocm_wheel" not in run.stderr, run.stderr[-3000:]
    assert not ws.path("dist").exists()


SUPPORTED = (
    '    supported_gpu_targets=["gfx942", "gfx950"],\n'
    '    supported_gpu_targets_source="https://github.com/ROCm/aiter/blob/e4048607/aiter/jit/utils/build_targets.py#L39",\n'
)


# First, while the shared copy's store has fetched nothing, so "before any fetch" is real (the
# cases after it fetch); a copy of its own started another pantsd (~10 s of CPU) for that.
def test_a_required_component_asked_for_a_target_upstream_does_not_build(ws: Workspace) -> None:
    ws.write(AOT_BUILD, ws.read(AOT_BUILD).replace('    kind="aotriton",\n', '    kind="aotriton",\n' + SUPPORTED))
    expected = (
        "tests/mini/aotriton:wheel is asked for gfx1151 (gpu_targets: gfx1151), but its upstream builds only "
        "gfx942, gfx950 (supported_gpu_targets, from https://github.com/ROCm/aiter/blob/e4048607/aiter/jit/utils/build_targets.py#L39). "
        "Drop the target from `gpu_targets`, make the component `optional=True`"
    )
    run = check(ws)
    assert run.returncode == 1 and expected in run.stdout
    plan = ws.pants("rocm-plan", "tests/mini/aotriton:wheel")
    assert "  WARNING   the build stops: upstream does not build these targets" in plan.stdout
    package = ws.package(VLLM)
    assert package.returncode != 0 and expected in package.stderr
    # Stopped before any fetch, too: the quick checks come first.
    assert "Fetching mini-" not in package.stderr
    assert_nothing_built(ws, package)


def test_the_mini_chain_passes_in_seconds_and_names_the_cmake_builds_use(ws: Workspace) -> None:
    ws.pants("--version")  # pantsd up: what is timed below is the preflight
    started = time.monotonic()
    run = check(ws)
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr[-3000:]
    commit = ws.upstreams.commits
    assert run.stdout.splitlines() == [
        f"ok    tests/mini/aotriton:wheel  (mini-aotriton {commit['aotriton'][:12]}, 0 patch(es))",
        f"ok    tests/mini/torch:wheel  (mini-torch {commit['torch'][:12]}, 1 patch(es))",
        f"ok    tests/mini/flash_attention:wheel  (mini-flash_attention {commit['flash_attention'][:12]}, 0 patch(es))",
        f"ok    tests/mini/vllm:wheel  (mini-vllm {commit['vllm'][:12]}, 1 patch(es), 2 locked distribution(s))",
        # requirements/build.txt lists cmake, as vLLM's does: left to the system.
        f"      note: 3rdparty/build/py3.11/mini-vllm.lock left out pip's cmake==3.31.6: builds use the system cmake ({SYSTEM_CMAKE})",
        "all 4 component(s) ok.",
    ]
    # A tripwire that holds on a loaded machine (62 s seen beside five other Pants): minutes, not
    # a build's hours. The figure itself is bench's (bench/run.py).
    assert elapsed < 180, f"the preflight took {elapsed:.0f} s"
    assert_nothing_built(ws, run)


def test_a_file_the_recipe_names_but_the_pin_lacks(ws: Workspace) -> None:
    ws.write(TORCH_BUILD, ws.read(TORCH_BUILD).replace(
        'kind="torch",', 'kind="torch",\n    build_command=["python tools/amd_build/build_amd.py"],'
    ))  # fmt: skip
    expected = (
        f"tests/mini/torch:wheel: tools/amd_build/build_amd.py is not in the tree of mini-torch at "
        f"{ws.upstreams.commits['torch']} (patched), but its build_command `python tools/amd_build/build_amd.py` "
        "needs it. Fix the recipe in tests/mini/torch/BUILD (upstream may have moved the file), or move the "
        "pin to a commit that has it."
    )
    run = check(ws)
    assert run.returncode == 1
    assert "FAIL  tests/mini/torch:wheel" in run.stdout and expected in run.stdout
    assert run.stdout.splitlines()[-1] == "1 problem(s): fix them before building."
    package = ws.package(VLLM)
    assert package.returncode != 0
    assert "tests/mini/vllm:wheel: 1 problem(s) found before any build" in package.stderr
    assert expected in package.stderr and "Traceback" not in package.stderr
    assert_nothing_built(ws, package)


# Three small upstreams beside the mini chain (issue 35): each fails the preflight for one of
# the upstream's own steps, before any compile, and passes once its recipe says the fix.
SIMPLE_SETUP = "from setuptools import setup\n\nsetup(name={name!r}, version='1.0.0', packages=[])\n"
# As setuptools-scm, vLLM's VLLM_GIT_DESCRIBE_COMMAND or PyTorch's version script: the version
# comes from `git describe` unless a variable says it.
SCM_SETUP = '''\
import os
import subprocess

from setuptools import setup


def version():
    return os.environ.get("MINI_SCM_PRETEND_VERSION") or subprocess.check_output(["git", "describe", "--tags"], text=True).strip()


setup(version=version(), packages=[])
'''
SCM_PYPROJECT = (
    '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
    '[project]\nname = "mini-scm"\ndynamic = ["version"]\n'
)
FETCH_CMAKE = '''\
cmake_minimum_required(VERSION 3.20)
project(mini_fetch)
include(FetchContent)
if (DEFINED ENV{MINI_KERNELS_SRC_DIR})
  FetchContent_Declare(kernels SOURCE_DIR $ENV{MINI_KERNELS_SRC_DIR})
else()
  FetchContent_Declare(
    kernels
    GIT_REPOSITORY https://github.com/ROCm/triton.git
    GIT_TAG 669b31acc1dd1b3fd93286afd5db67f65d9f7557)
endif()
'''
RUNREQ_SETUP = (
    "from setuptools import setup\n\nsetup(name='mini-runreq', version='1.0.0', packages=[], "
    "install_requires=['six', 'torch', 'einops>=0.8', \"tomli; python_version < '3'\"])\n"
)
TORCH_CMAKE = 'cmake_minimum_required(VERSION 3.20)\nset(TORCH_SUPPORTED_VERSION_ROCM "2.9.1")\n'
STEPS_UPSTREAMS = {
    "scm": {"pyproject.toml": SCM_PYPROJECT, "setup.py": SCM_SETUP},
    "fetch": {"setup.py": SIMPLE_SETUP.format(name="mini-fetch"), "cmake/external_projects/kernels.cmake": FETCH_CMAKE},
    "torchpin": {"setup.py": SIMPLE_SETUP.format(name="mini-torchpin"), "CMakeLists.txt": TORCH_CMAKE},
    # Its wheel will require six (asked for), torch (the chain's), einops (nobody asks) and,
    # on a Python this build does not use, tomli.
    "runreq": {"setup.py": RUNREQ_SETUP},
}
RUNREQ_FIELDS = '    dependencies=["tests/mini/torch:wheel"],\n    runtime_requirements=["six"{}],\n'
STEPS_TARGETS = [f"tests/mini/{name}:wheel" for name in STEPS_UPSTREAMS]


def steps_recipe(name: str, extra: str = "") -> str:
    return (
        f'upstream_repo(name="src", pin="mini-{name}", pins_file="tests/mini/pins")\n\n'
        f'rocm_wheel(\n    name="wheel",\n    source=":src",\n    toolchain="tests/mini:llvm",\n'
        f'    gpu_targets=["gfx1151"],\n{extra})\n'
    )


@pytest.fixture
def steps_ws(ws: Workspace, tmp_path):
    commits = {}
    for name, files in STEPS_UPSTREAMS.items():
        repo = tmp_path / "steps-upstreams" / name
        repo.mkdir(parents=True)
        make_upstreams.git(repo, "init", "-q", "-b", "main")
        commits[name] = make_upstreams.commit(repo, files, f"mini {name}")
        # The scm upstream is pinned on a release tag: its version comes from the track.
        track = "v0.31.0" if name == "scm" else "main"
        ws.write(f"tests/mini/pins/mini-{name}.toml", f'[mini-{name}]\nurl = "file://{repo}"\ntrack = "{track}"\ncommit = "{commits[name]}"\n')
        ws.path(f"tests/mini/{name}").mkdir()
    ws.write("tests/mini/scm/BUILD", steps_recipe("scm"))
    ws.write("tests/mini/fetch/BUILD", steps_recipe("fetch"))
    ws.write("tests/mini/torchpin/BUILD", steps_recipe("torchpin", '    dependencies=["tests/mini/torch:wheel"],\n'))
    ws.write("tests/mini/runreq/BUILD", steps_recipe("runreq", RUNREQ_FIELDS.format("")))
    # The chain's torch says its version as PyTorch's recipe does.
    ws.write(TORCH_BUILD, ws.read(TORCH_BUILD).replace('kind="torch",', 'kind="torch",\n    env={"PYTORCH_BUILD_VERSION": "2.13.0"},'))
    ws.steps_commits = commits
    return ws


def test_the_upstreams_own_steps_report_git_versions_downloads_and_torch_before_any_compile(steps_ws: Workspace) -> None:
    ws, commits = steps_ws, steps_ws.steps_commits
    run = ws.pants("rocm-plan", "--check", *STEPS_TARGETS)
    assert run.returncode == 1, run.stderr[-3000:]
    out = run.stdout
    scm = (
        f"tests/mini/scm:wheel: the metadata hook of pyproject.toml (mini-scm at {commits['scm']}) needs `.git` to "
        "know its version, and a build's tree has none:\n"
        # git's words (and where it stopped looking, the build's fixed path), then the fix.
        "        fatal: not a git repository (or any parent up to mount point /mnt/rocm-build)\n"
        "      Fix: set `version_env` in tests/mini/scm/BUILD to the variable the upstream reads instead, e.g. "
        '`version_env=["SETUPTOOLS_SCM_PRETEND_VERSION"]`; it gets 0.31.0 (the pin\'s version: add `version = "..."` '
        "to [mini-scm] in tests/mini/pins if that is not it)."
    )
    assert "FAIL  tests/mini/scm:wheel" in out
    assert f"      - {scm}\n" in out, out
    fetch = (
        f"tests/mini/fetch:wheel: cmake/external_projects/kernels.cmake (mini-fetch at {commits['fetch']}) would download "
        "at build time, which a build cannot (no network): line 7 FetchContent_Declare: `FetchContent_Declare(`. Fix: pin "
        "what it fetches (an upstream_archive in `archives`) and map the file to the variable that makes it use that copy "
        'in `downloads_covered` in tests/mini/fetch/BUILD (or `"not run: <why>"` where this build never reaches it), or '
        "patch the download out."
    )
    assert f"      - {fetch}\n" in out
    torch = (
        f"tests/mini/torchpin:wheel: CMakeLists.txt line 2 (mini-torchpin at {commits['torchpin']}) names torch 2.9.1 "
        '(`set(TORCH_SUPPORTED_VERSION_ROCM "2.9.1")`), but the chain\'s torch is 2.13.0 (tests/mini/torch:wheel (`env` '
        "PYTORCH_BUILD_VERSION)). Fix: move one of the pins so they agree, or patch the line if upstream's is wrong."
    )
    assert f"      - {torch}\n" in out
    runreq = (
        "tests/mini/runreq:wheel: its wheel will require `einops>=0.8` (Requires-Dist, from the metadata hook of setup.py), "
        "which its install set lacks: nothing in its chain provides einops and no `runtime_requirements` asks for it. "
        "Fix: add `einops>=0.8` to `runtime_requirements` in tests/mini/runreq/BUILD and relock: "
        "pants lock-runtime-requirements tests/mini/runreq:wheel"
    )
    assert f"      - {runreq}\n" in out, out
    assert out.splitlines()[-1] == "4 problem(s): fix them before building."
    package = ws.package("tests/mini/torchpin:wheel")
    assert package.returncode != 0
    assert "tests/mini/torchpin:wheel: 1 problem(s) found before any build" in package.stderr and torch in package.stderr
    assert_nothing_built(ws, package)
    # Only the preflight's hook ran in a build sandbox, never a build (no build log either).
    assert "Running the metadata hook of tests/mini/scm:wheel (preflight, no compile)" in run.stderr
    assert not list(ws.named_caches.glob("rocm_build_logs/*wheel.log"))

    # The recipes say the fixes: the version through the upstream's variable, the download
    # through its override variable, and the torch the upstream names.
    ws.write("tests/mini/scm/BUILD", steps_recipe("scm", '    version_env=["MINI_SCM_PRETEND_VERSION"],\n'))
    ws.write("tests/mini/fetch/BUILD", steps_recipe("fetch", (
        '    env={"MINI_KERNELS_SRC_DIR": "$ROCM_BUILD_SANDBOX/kernels"},\n'
        '    downloads_covered={"cmake/external_projects/kernels.cmake": "MINI_KERNELS_SRC_DIR"},\n'
    )))  # fmt: skip
    ws.write(TORCH_BUILD, ws.read(TORCH_BUILD).replace('"PYTORCH_BUILD_VERSION": "2.13.0"', '"PYTORCH_BUILD_VERSION": "2.9.1"'))
    ws.write("tests/mini/runreq/BUILD", steps_recipe("runreq", RUNREQ_FIELDS.format(', "einops>=0.8"')))
    run = ws.pants("rocm-plan", "--check", *STEPS_TARGETS)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.splitlines()[-1] == "all 6 component(s) ok.", run.stdout
    assert f"ok    tests/mini/scm:wheel  (mini-scm {commits['scm'][:12]}, 0 patch(es))" in run.stdout
    plan = ws.pants("rocm-plan", "tests/mini/scm:wheel")
    assert "    MINI_SCM_PRETEND_VERSION=0.31.0" in plan.stdout, plan.stdout


TORCH_PIN, SDK_PIN, FA_PIN = (f"tests/mini/pins/mini-{name}.toml" for name in ("torch", "sdk", "flash_attention"))


def test_a_pin_derived_from_a_recipe_line_must_be_what_the_line_names(ws: Workspace) -> None:
    # Mini flash-attention's tree carries the recipe (vLLM's docker/Dockerfile.rocm_base in small):
    # mini torch is derived from its ARG, as the real torch pin is from vLLM's.
    ups = ws.upstreams
    torch, first = ups.commits["torch"], ups.commits["flash_attention"]
    recipe = "docker/Dockerfile.rocm_base"
    # Its requirement file names the SDK the prebuilt pin must be (requirements/build/rocm.txt in small).
    requirements = "requirements/rocm.txt"
    fa = ups.new_commit("flash_attention", {recipe: f'ARG PYTORCH_BRANCH="{torch[:7]}" # release\n',
                                            requirements: "mini-rocm-sdk-core==1.0.0\n"}, "recipe")  # fmt: skip
    ws.write(FA_PIN, ws.read(FA_PIN).replace(first, fa))
    derived = f'commit = "{torch}"\nderived_from = "mini-flash_attention:{recipe}#PYTORCH_BRANCH"\n'
    sdk = 'project = "mini-rocm-sdk-core"\n'
    ws.write(TORCH_PIN, ws.read(TORCH_PIN).replace(f'commit = "{torch}"\n', derived))
    ws.write(SDK_PIN, ws.read(SDK_PIN).replace(sdk, sdk + f'derived_from = "mini-flash_attention:{requirements}#mini-rocm-sdk-core"\n'))
    try:
        ok = check(ws)
        assert ok.returncode == 0, ok.stdout + ok.stderr[-3000:]
        line = f'`ARG PYTORCH_BRANCH="{torch[:7]}" # release`'
        assert f"mini-torch {torch[:12]} is what {recipe} line 1 of mini-flash_attention at {fa[:12]} ({line}) names" in ok.stdout
        assert f"prebuilt.mini-sdk 1.0.0 is what {requirements} line 1 of mini-flash_attention at {fa[:12]}" in ok.stdout
        # The recipe moves to another torch; the pin stays: refused before any build, naming both.
        moved = ups.new_commit("flash_attention", {recipe: 'ARG PYTORCH_BRANCH="0123abc"\n', requirements: "mini-rocm-sdk-core==1.0.1\n"}, "another torch")
        ws.write(FA_PIN, ws.read(FA_PIN).replace(fa, moved))
        run = check(ws)
        assert run.returncode == 1
        assert (
            f"tests/mini/torch:wheel: [mini-torch] in tests/mini/pins pins file://{ups.root}/torch at {torch[:12]} "
            f"(track 'main'), but {recipe} line 1 of mini-flash_attention at {moved[:12]} (`ARG PYTORCH_BRANCH=\"0123abc\"`) "
            "names 0123abc: the chain is not the one the recipe builds. Fix: `pants run rules:update-pins -- --only "
            "mini-flash_attention` sets it from the recipe"
        ) in run.stdout, run.stdout
        assert (
            "[prebuilt.mini-sdk] in tests/mini/pins pins mini-rocm-sdk-core 1.0.0 (track '==1.0.0'), but "
            f"{requirements} line 1 of mini-flash_attention at {moved[:12]} (`mini-rocm-sdk-core==1.0.1`) names 1.0.1"
        ) in run.stdout, run.stdout
        assert_nothing_built(ws, run)
    finally:
        ups.commits["flash_attention"] = first  # what the copy pins again once reset


# The cases that build a wheel: last (see the module's docstring).
def test_an_optional_component_asked_for_a_target_upstream_does_not_build_is_skipped(ws: Workspace) -> None:
    # An AITER stand-in, optional, whose upstream list lacks gfx1151.
    ws.path("tests/mini/aiter").mkdir()
    ws.write("tests/mini/aiter/BUILD", (
        'rocm_wheel(\n    name="wheel",\n    source="tests/mini/aotriton:src",\n    toolchain="tests/mini:llvm",\n'
        '    gpu_targets=["gfx1151"],\n    kind="aiter",\n    optional=True,\n' + SUPPORTED + ")\n"
    ))  # fmt: skip
    ws.write("tests/mini/vllm/BUILD", ws.read("tests/mini/vllm/BUILD").replace(
        '"tests/mini/flash_attention:wheel"]', '"tests/mini/flash_attention:wheel", "tests/mini/aiter:wheel"]'
    ))  # fmt: skip
    why = "tests/mini/aiter:wheel is asked for gfx1151 (gpu_targets: gfx1151), but its upstream builds only gfx942, gfx950"
    run = check(ws)
    assert run.returncode == 0, run.stdout
    skip = [line for line in run.stdout.splitlines() if line.startswith("skip  tests/mini/aiter:wheel: ")]
    assert len(skip) == 1 and why in skip[0] and skip[0].endswith("It is optional: skipped, its dependents are built without it.")
    assert run.stdout.splitlines()[-1] == "4 component(s) ok, 1 skipped."
    package = ws.package(VLLM)
    assert package.returncode == 0, package.stderr[-3000:]
    assert f"tests/mini/vllm:wheel: building without optional tests/mini/aiter:wheel: {why}" in package.stderr
    assert package.built == ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", VLLM]
    assert sorted(p.name for p in ws.path("dist").iterdir()) == [
        "tests.mini.aotriton", "tests.mini.flash_attention", "tests.mini.sdk.core", "tests.mini.sdk.gfx1151",
        "tests.mini.torch", "tests.mini.vllm", "tests.mini.vllm.install",
    ]
    # The install set has no aiter either.
    assert "aiter" not in ws.read("dist/tests.mini.vllm.install/requirements.txt")


def test_an_accepted_missing_target_is_recorded_with_the_arches_found(ws: Workspace) -> None:
    ws.write(AOT_BUILD, ws.read(AOT_BUILD).replace('    kind="aotriton",\n', (
        '    kind="aotriton",\n    env={"PYTORCH_ROCM_ARCH": "gfx1100"},\n    allow_missing_gpu_targets=["gfx1151"],\n'
    )))  # fmt: skip
    run = ws.package("tests/mini/aotriton:wheel")
    assert run.returncode == 0, run.stderr[-3000:]
    (wheel,) = ws.path("dist").glob("tests.mini.aotriton/*.whl")
    info = json.loads(zipfile.ZipFile(wheel).read(f"{'-'.join(wheel.name.split('-')[:2])}.dist-info/rocm_build_info.json"))
    assert info["gpu_code"] == {"mini_aotriton/kernels/scale-gfx1100.co": ["gfx1100"]}
    assert info["allow_missing_gpu_targets"] == ["gfx1151"]
