"""The graph Pants sees is the build's graph: on the miniature chain in a git repository,
`dependencies` and `dependents` show every input of a wheel, and `--changed-since` with
`--changed-dependents=transitive` selects exactly what a change rebuilds (docs/pins-and-patches.md,
"What a change rebuilds")."""

from __future__ import annotations

import subprocess
from typing import List

import pytest

from e2e.workspace import Workspace, make_fixture_upstreams, require_success

CHAIN = ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", "tests/mini/vllm:wheel"]
BUILD_TYPES = "--filter-target-type=rocm_wheel,upstream_repo,prebuilt_wheel,upstream_archive,triton_kernel_test,upstream_choices_test"


def git(ws: Workspace, *args: str) -> str:
    identity = ["-c", "user.name=rocm-pants tests", "-c", "user.email=tests@rocm-pants.invalid"]
    return subprocess.run(["git", "-C", str(ws.root), *identity, *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("graph")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "the miniature chain")
    yield workspace
    workspace.stop()


def lines(ws: Workspace, *args: str) -> List[str]:
    return sorted(require_success(ws.pants(*args), " ".join(args)).stdout.split())


def test_a_wheel_depends_on_everything_it_is_built_from(ws: Workspace) -> None:
    assert lines(ws, "dependencies", "tests/mini/vllm:wheel") == [
        "3rdparty/build/py3.11/mini-vllm.lock:locks",  # its build lock
        "tests/mini/flash_attention:wheel",
        "tests/mini/pins/mini-vllm.toml",  # its source's pin (the file of the pins directory)
        "tests/mini/torch:wheel",
        "tests/mini/vllm:src",  # `source`
        "tests/mini:llvm",  # `toolchain`
    ]
    assert lines(ws, "dependencies", "tests/mini/flash_attention:wheel") == [
        "3rdparty/run/py3.11/mini-flash_attention.lock:locks",  # the run-time lock of its install set
        "tests/mini/flash_attention:src",
        "tests/mini/pins/mini-flash_attention.toml",
        "tests/mini/torch:wheel",
        "tests/mini:llvm",
    ]
    assert lines(ws, "dependencies", "tests/mini/vllm:src") == ["tests/mini/patches/vllm:gfx1151", "tests/mini/pins/mini-vllm.toml"]
    # A device wheel's pin is in its host's file.
    assert lines(ws, "dependencies", "tests/mini/sdk:gfx1151") == ["tests/mini/pins/mini-sdk.toml", "tests/mini/sdk:core"]
    # A pinned archive, and a kernel test's source.
    assert "components/archives/vllm-sdist.toml" in lines(ws, "dependencies", "components/vllm:sdist")
    assert "components/vllm:sdist" in lines(ws, "dependencies", "components/vllm:kernels")
    # A choices test on the module its workload imports: the kernel test whose workload it is.
    assert {"components/vllm:sdist", "components/vllm:kernels"} <= set(lines(ws, "dependencies", "components/vllm:choices"))
    assert "components/vllm/kernels_workload.py" in lines(ws, "filedeps", "--transitive", "components/vllm:choices")
    assert lines(ws, "dependents", "--transitive", "tests/mini/torch:src") == sorted(CHAIN[1:])
    paths = require_success(ws.pants("paths", "--from=tests/mini/vllm:wheel", "--to=tests/mini/pins/mini-aotriton.toml:pins"), "paths")
    assert "tests/mini/aotriton:src" in paths.stdout and "tests/mini/torch:wheel" in paths.stdout


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
        ("components/vllm/kernels_workload.py", "# touched\n", ["components/vllm:kernels", "components/vllm:choices"]),
        ("components/flash_attention/kernels_workload.py", "# touched\n",
         ["components/flash_attention:kernels", "components/flash_attention:choices"]),
    ],
    ids=["patch", "pin", "prebuilt pin", "build lock", "run-time lock", "vllm workload module", "flash-attention workload module"],
)  # fmt: skip
def test_changed_since_selects_exactly_what_a_change_rebuilds(ws: Workspace, path: str, edit: str, selected: List[str]) -> None:
    original = ws.read(path)
    ws.write(path, original + edit)
    try:
        got = lines(ws, "--changed-since=HEAD", "--changed-dependents=transitive", "list", BUILD_TYPES)
    finally:
        ws.write(path, original)
    assert got == sorted(selected)
