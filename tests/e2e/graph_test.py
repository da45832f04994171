"""The graph Pants sees is the build's graph: in a copy of this repository committed to git (the
miniature chain pinning its fixture repositories), `dependencies` and `dependents` show every input
of a wheel, and `--changed-since` with `--changed-dependents=transitive` selects exactly what a
change rebuilds and tests, the real components and this repository's own tests included
(docs/pins-and-patches.md, "What a change rebuilds")."""

from __future__ import annotations

import json
import subprocess
import time
from typing import List

import pytest

from e2e.workspace import REPOSITORY_FILES, Workspace, make_fixture_upstreams, require_success

CHAIN = ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", "tests/mini/vllm:wheel"]
BUILD_TYPES = "--filter-target-type=rocm_wheel,upstream_repo,prebuilt_wheel,upstream_archive,triton_kernel_test,upstream_choices_test"
# What the CI recipe's goals act on: `package` the targets that have a package (wheels, an
# upstream's patched tree, the plugin's `pants run` tools), `test` the tests.
PACKAGED = "--filter-target-type=rocm_wheel,upstream_repo,pex_binary"
TESTED = "--filter-target-type=python_test,triton_kernel_test,upstream_choices_test"
CHANGED = ("--changed-since=HEAD", "--changed-dependents=transitive")
# The end-to-end files that copy components/ and patches/ (tests/e2e/BUILD: REAL_CHAIN).
READ_COMPONENTS = ["choices_test.py", "components_test.py", "graph_test.py", "hermetic_test.py", "kernels_test.py"]


def git(ws: Workspace, *args: str) -> str:
    identity = ["-c", "user.name=rocm-pants tests", "-c", "user.email=tests@rocm-pants.invalid"]
    return subprocess.run(["git", "-C", str(ws.root), *identity, *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("graph")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named", files=REPOSITORY_FILES)
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "the repository")
    # As a clone of CI sees it: the main branch as fetched, what `--changed-since=origin/main` names.
    git(workspace, "update-ref", "refs/remotes/origin/main", "HEAD")
    yield workspace
    workspace.stop()


def lines(ws: Workspace, *args: str) -> List[str]:
    return sorted(require_success(ws.pants(*args), " ".join(args)).stdout.split())


def every(ws: Workspace, types: str) -> List[str]:
    return lines(ws, f"--filter-target-type={types}", "list", "::")


def edited(ws: Workspace, path: str, edit: str, *args: str) -> List[str]:
    """What `args` print with `path` edited (not committed), as a CI run on that edit would select:
    `edit` appended, or `old=>new` replaced once."""
    original = ws.read(path)
    old, arrow, new = edit.partition("=>")
    assert not arrow or old in original, (old, path)
    ws.write(path, original.replace(old, new, 1) if arrow else original + edit)
    try:
        return lines(ws, *args)
    finally:
        ws.write(path, original)


def test_a_wheel_depends_on_everything_it_is_built_from(ws: Workspace) -> None:
    vllm = lines(ws, "dependencies", "tests/mini/vllm:wheel")
    # The scripts the plugin runs in its sandboxes, as one edge: the `target` gathering the `resources`
    # that ship them, which has every script as a dependency and none of their tests.
    scripts = [a for a in vllm if a.startswith("rules/rocm_build/scripts")]
    assert scripts == ["rules/rocm_build/scripts:sandbox-scripts"]
    gathered = lines(ws, "dependencies", scripts[0])
    assert "rules/rocm_build/scripts/build_wheel.sh" in gathered and not [s for s in gathered if s.endswith("_test.py")]
    assert [a for a in vllm if a not in scripts] == [
        "//pants.offline.toml:config",  # the config files Pants read the options from (./pants adds this one)
        "//pants.toml:config",
        "3rdparty/build/py3.11/mini-vllm.lock:mini-locks",  # its build lock
        "tests/mini/flash_attention:wheel",
        "tests/mini/pins/mini-vllm.toml",  # its source's pin (the file of the pins directory)
        "tests/mini/torch:wheel",
        "tests/mini/vllm:src",  # `source`
        "tests/mini:llvm",  # `toolchain`
    ]
    flash_attention = lines(ws, "dependencies", "tests/mini/flash_attention:wheel")
    assert "3rdparty/run/py3.11/mini-flash_attention.lock:mini-locks" in flash_attention  # the run-time lock of its install set
    assert lines(ws, "dependencies", "tests/mini/vllm:src") == ["tests/mini/patches/vllm:gfx1151", "tests/mini/pins/mini-vllm.toml"]
    # A device wheel's pin is in its host's file.
    assert lines(ws, "dependencies", "tests/mini/sdk:gfx1151") == ["tests/mini/pins/mini-sdk.toml", "tests/mini/sdk:core"]
    # A pinned archive, and a kernel test's source and the plugin's own inputs.
    assert "components/archives/vllm-sdist.toml" in lines(ws, "dependencies", "components/vllm:sdist")
    kernels = lines(ws, "dependencies", "components/vllm:kernels")
    assert {"components/vllm:sdist", "//pants.toml:config", "rules/rocm_build/scripts:sandbox-scripts"} <= set(kernels)
    assert not [a for a in kernels if a.startswith("rules/rocm_build/scripts/")]  # the scripts as one edge
    # A choices test on the module its workload imports: the kernel test whose workload it is.
    assert {"components/vllm:sdist", "components/vllm:kernels"} <= set(lines(ws, "dependencies", "components/vllm:choices"))
    assert "components/vllm/kernels_workload.py" in lines(ws, "filedeps", "--transitive", "components/vllm:choices")
    assert lines(ws, "dependents", "--transitive", "tests/mini/torch:src") == sorted(CHAIN[1:])
    paths = require_success(ws.pants("paths", "--from=tests/mini/vllm:wheel", "--to=tests/mini/pins/mini-aotriton.toml:pins"), "paths")
    assert "tests/mini/aotriton:src" in paths.stdout and "tests/mini/torch:wheel" in paths.stdout


def test_a_wheel_built_from_an_archive_depends_on_both_its_locks_and_only_the_wheels_it_installs(ws: Workspace) -> None:
    from_sdist = lines(ws, "dependencies", "components/flash_attention:wheel-from-sdist")
    assert {
        "3rdparty/build/py3.11/flash-attention-sdist.lock:locks",
        "3rdparty/run/py3.11/flash-attention-sdist.wheel-from-sdist.lock:locks",
        "components/archives/flash-attention-sdist.toml",
        "components/flash_attention:sdist",
        "components/kernels:build-venv#kernels-torch",
    } <= set(from_sdist)
    # What its build installs is what Pants lists: every kernels-* wheel but their setuptools.
    assert not [a for a in from_sdist if "setuptools" in a]


# What the locks of a wheel built from an archive select: it, the kernel test of what it builds,
# and the choices tests that import that test's workload.
FROM_SDIST = [
    "components/flash_attention:choices", "components/flash_attention:choices-unpatched", "components/flash_attention:kernels",
    "components/flash_attention:wheel-from-sdist",
]


@pytest.mark.parametrize(
    "path, edit, selected",
    [
        # A patch: its component's upstream and wheel, and the wheels built on it.
        ("tests/mini/patches/torch/0001-answer.edit.toml", "# touched\n", ["tests/mini/torch:src", *CHAIN[1:]]),
        # A moved pin: that component's targets and their dependents, not the other components.
        ("tests/mini/pins/mini-flash_attention.toml", "# moved\n", ["tests/mini/flash_attention:src", *CHAIN[2:]]),
        ("tests/mini/pins/mini-sdk.toml", "# moved\n", ["tests/mini/sdk:core", "tests/mini/sdk:gfx1151", *CHAIN[1:]]),
        # A build lock: the wheel built with it.
        ("3rdparty/build/py3.11/mini-vllm.lock", "# touched\n", ["tests/mini/vllm:wheel"]),
        # A run-time lock: the wheel whose install set it locks, and those built on it.
        ("3rdparty/run/py3.11/mini-flash_attention.lock", "# touched\n", CHAIN[2:]),
        # A workload's module: its kernel test and the choices test whose workload imports it.
        ("components/vllm/kernels_workload.py", "# touched\n",
         ["components/vllm:kernels", "components/vllm:choices", "components/vllm:choices-unpatched"]),
        ("components/flash_attention/kernels_workload.py", "# touched\n",
         ["components/flash_attention:kernels", "components/flash_attention:choices", "components/flash_attention:choices-unpatched"]),
        # The real components: a patch selects both upstreams it patches, their wheels and the
        # kernel and choice tests of the patched sdist (and the unpatched sdist's choices test,
        # whose workload imports the kernel test's).
        ("patches/vllm/0001-hip-archs-gfx1151.edit.toml", "# touched\n",
         ["components/vllm:choices", "components/vllm:choices-unpatched", "components/vllm:kernels", "components/vllm:sdist",
          "components/vllm:src", "components/vllm:wheel", "components/vllm:wheel-on-therock"]),
        ("components/pins/vllm.toml", "# moved\n", ["components/vllm:src", "components/vllm:wheel", "components/vllm:wheel-on-therock"]),
        ("components/archives/flash-attention-sdist.toml", "# moved\n",
         ["components/flash_attention:choices", "components/flash_attention:choices-unpatched", "components/flash_attention:kernels",
          "components/flash_attention:sdist", "components/flash_attention:sdist-unpatched", "components/flash_attention:wheel-from-sdist"]),
        # The locks of a wheel built from an archive (FROM_SDIST).
        ("3rdparty/build/py3.11/flash-attention-sdist.lock", "# touched\n", FROM_SDIST),
        ("3rdparty/run/py3.11/flash-attention-sdist.wheel-from-sdist.lock", "# touched\n", FROM_SDIST),
    ],
    ids=["patch", "pin", "prebuilt pin", "build lock", "run-time lock", "vllm workload module", "flash-attention workload module",
         "real patch", "real pin", "archive pin", "archive wheel's build lock", "archive wheel's run-time lock"],
)  # fmt: skip
def test_changed_since_selects_exactly_what_a_change_rebuilds(ws: Workspace, path: str, edit: str, selected: List[str]) -> None:
    assert edited(ws, path, edit, *CHANGED, "list", BUILD_TYPES) == sorted(selected)


@pytest.mark.parametrize(
    "path, edit",
    [("rules/rocm_build/scripts/build_wheel.sh", "# touched\n"), ("pants.toml", 'python = "3.12"=>python = "CPython==3.12.*"')],
    ids=["sandbox script", "pants.toml"],
)
def test_the_plugins_scripts_and_config_select_every_wheel_and_test(ws: Workspace, path: str, edit: str) -> None:
    # Every build's key holds them: every wheel, kernel and choice test, and every end-to-end
    # test that runs the plugin (all but the bench's start and a patch applied alone).
    kinds = "rocm_wheel,triton_kernel_test,upstream_choices_test"
    wheels_and_tests = every(ws, kinds)
    assert len([a for a in wheels_and_tests if a.endswith((":wheel", ":wheel-from-sdist", ":wheel-on-therock"))]) >= 14
    # One run on the edit asks for both kinds at once, read apart below by the unedited lists of
    # each kind: an edit of the plugin's files or pants.toml restarts pantsd (~10 s of CPU, the
    # rule graph), once to take the edit and once to drop it, which a second run would pay again.
    selected = edited(ws, path, edit, *CHANGED, f"--filter-target-type={kinds},python_test", "list")
    assert [a for a in selected if a in wheels_and_tests] == wheels_and_tests
    tested = set(every(ws, TESTED[len("--filter-target-type=") :]))
    e2e = [a for a in selected if a in tested and a.startswith("tests/e2e/")]
    assert [a for a in every(ws, "python_test") if a.startswith("tests/e2e/") and a not in e2e] == [
        "tests/e2e/bench_test.py:bench",
        "tests/e2e/rocm_init_test.py:rocm_init",
        "tests/e2e/workspace_test.py:workspace",
    ]


# What `test` takes from the targets it is given: the test targets, and each test generator's
# every file (a generator as an argument means all it generates).
TEST_KINDS = "python_tests,python_test,triton_kernel_test,upstream_choices_test"


def e2e_tests(files: List[str]) -> List[str]:
    """The generator of each end-to-end file and the file's own target (tests/e2e/BUILD)."""
    return [a for f in files for stem in [f[: -len("_test.py")]] for a in (f"tests/e2e:{stem}", f"tests/e2e/{f}:{stem}")]


@pytest.mark.parametrize(
    "path, packaged, tested",
    [
        ("patches/vllm/0001-hip-archs-gfx1151.edit.toml",
         ["components/vllm:src", "components/vllm:wheel", "components/vllm:wheel-on-therock"],
         ["components/vllm:choices", "components/vllm:choices-unpatched", "components/vllm:kernels", *e2e_tests(READ_COMPONENTS)]),
        # A moved pin: the git upstream and its wheels, the end-to-end files that copy components/,
        # and the two plugin tests that read the pins as the docs name them; not their siblings.
        ("components/pins/vllm.toml",
         ["components/vllm:src", "components/vllm:wheel", "components/vllm:wheel-on-therock"],
         ["rules/rocm_build/programs:docs_check", "rules/rocm_build/programs/docs_check_test.py:docs_check",
          "rules/rocm_build/upstream:recipe_values", "rules/rocm_build/upstream/recipe_values_test.py:recipe_values",
          *e2e_tests(READ_COMPONENTS)]),
    ],
    ids=["real patch", "real pin"],
)  # fmt: skip
def test_the_ci_recipe_packages_and_tests_what_a_change_reads(ws: Workspace, path: str, packaged: List[str], tested: List[str]) -> None:
    """docs/pins-and-patches.md's recipe, `--changed-since=origin/main --changed-dependents=transitive
    package test`, on a branch with a one-line change: what `package` and `test` are given, read
    unfiltered (a filter by type would hide a test generator, which `test` runs whole)."""
    recipe = ("--changed-since=origin/main", "--changed-dependents=transitive")
    git(ws, "checkout", "-q", "-b", "a-fix")
    try:
        ws.write(path, ws.read(path) + "# a one-line fix\n")
        git(ws, "commit", "-q", "-am", "a one-line fix")
        start = time.perf_counter()
        selected = set(lines(ws, *recipe, "list"))
        print(f"the CI recipe's selection: {time.perf_counter() - start:.1f} s")
    finally:
        git(ws, "checkout", "-q", "main")
        git(ws, "branch", "-q", "-D", "a-fix")
    assert sorted(selected & set(every(ws, PACKAGED[len("--filter-target-type=") :]))) == packaged
    assert sorted(selected & set(every(ws, TEST_KINDS))) == sorted(tested)
    # Against every end-to-end file (each a nested Pants with a 1,800 s timeout) before issue 57.
    assert len([a for a in every(ws, "python_test") if a.startswith("tests/e2e/")]) == 30


def test_each_end_to_end_file_has_a_test_generator_of_its_own(ws: Workspace) -> None:
    # What `test` runs for a generator it is given is every file of it: each holds one.
    on_disk = sorted(p.name for p in ws.path("tests/e2e").glob("*_test.py"))
    peeked = json.loads(require_success(ws.pants("peek", "tests/e2e:"), "peek").stdout)
    generators = {t["address"]: t["sources"] for t in peeked if t["target_type"] == "python_tests"}
    assert generators == {f"tests/e2e:{f[: -len('_test.py')]}": [f"tests/e2e/{f}"] for f in on_disk}


def test_no_file_has_an_owner_in_a_directory_above_it(ws: Workspace) -> None:
    # Each is owned in its own directory (docs/layout.md): no `path:../name` address.
    assert [a for a in lines(ws, "list", "::") if ":../" in a] == []
