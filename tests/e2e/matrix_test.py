"""The build matrix on the miniature chain: Python versions and gpu targets through
`parametrize`, the interpreter keyed by what it is, not where it is.

The cases share one copy (its pantsd and store), put back after each: a fresh copy per case
proved nothing more. Each case's builds have addresses of their own (the address is in a
wheel's key), so what one case built is no hit for another's `built` assertions. The case
that fails before any fetch comes first: in file order, too, nothing has been fetched then."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from e2e.wheels import code_object_archs, unkeyed
from e2e.workspace import Workspace, file_copy, require_success

COMPONENTS = ["aotriton", "torch", "flash_attention", "vllm"]
PYTHONS = ["3.11", "3.12"]


@pytest.fixture(scope="module")
def shared_ws(tmp_path_factory):
    with file_copy(tmp_path_factory, "matrix") as copy:
        yield copy


def parametrize_python(ws: Workspace) -> None:
    for name in COMPONENTS:
        build = f"tests/mini/{name}/BUILD"
        ws.write(build, ws.read(build).replace('    gpu_targets=["gfx1151"],\n', (
            '    gpu_targets=["gfx1151"],\n    python=parametrize("3.11", "3.12"),\n'
        )))  # fmt: skip


def variants(component: str) -> list:
    return [f"tests/mini/{component}:wheel@python={p}" for p in PYTHONS]


def build_info(wheel: Path) -> dict:
    name_version = "-".join(wheel.name.split("-")[:2])
    return json.loads(zipfile.ZipFile(wheel).read(f"{name_version}.dist-info/rocm_build_info.json"))


def test_a_missing_python_fails_before_any_fetch(ws) -> None:
    build = "tests/mini/aotriton/BUILD"
    ws.write(build, ws.read(build).replace('    kind="aotriton",\n', '    kind="aotriton",\n    python="3.99",\n'))
    run = ws.package("tests/mini/aotriton:wheel")
    assert run.returncode != 0
    assert (
        "tests/mini/aotriton:wheel: no Python interpreter matches `python` = '3.99' (CPython==3.99.*). "
        "Looked on [python-bootstrap].search_path: "
    ) in run.stderr, run.stderr[-3000:]
    assert "Install one (`pyenv install 3.12`" in run.stderr
    assert "Fetching mini-" not in run.stderr and not ws.path("dist").exists()


def test_one_build_file_two_pythons(ws) -> None:
    parametrize_python(ws)
    ws.put_back("3rdparty/build", "3rdparty/run")  # the lock goals write there
    # Locks are per Python: the 3.12 variant of the mini vllm gets its own.
    require_success(ws.pants("lock-build-requirements", "tests/mini/vllm:wheel@python=3.12"), "locking for 3.12")
    assert "# python: 3.12\n" in ws.read("3rdparty/build/py3.12/mini-vllm.lock")
    # Run-time locks too: the mini flash_attention's `runtime_requirements` (six).
    require_success(
        ws.pants("lock-runtime-requirements", "tests/mini/flash_attention:wheel@python=3.12"), "run-time lock for 3.12"
    )
    assert "# python: 3.12\n" in ws.read("3rdparty/run/py3.12/mini-flash_attention.lock")

    first = require_success(ws.package("tests/mini/vllm:wheel@python=3.11"), "the 3.11 chain")
    assert first.built == [f"tests/mini/{c}:wheel@python=3.11" for c in COMPONENTS]
    second = require_success(ws.package("tests/mini/vllm:wheel@python=3.12"), "the 3.12 chain")
    assert second.built == [f"tests/mini/{c}:wheel@python=3.12" for c in COMPONENTS]  # no 3.11 build
    both = require_success(ws.package(*variants("vllm")), "both again")
    assert both.built == []

    for python in PYTHONS:
        tag = "cp" + python.replace(".", "")
        wheels = sorted(ws.path("dist").glob(f"tests.mini.*@python={python}/*.whl"))
        assert len(wheels) == 4 and all(f"-{tag}-{tag}-" in w.name for w in wheels), wheels
        (vllm,) = [w for w in wheels if w.name.startswith("mini_vllm-")]
        info = build_info(vllm)
        assert info["python"].startswith(f"CPython {python}.")
        # Built against the same Python's dependency wheels.
        assert {d["target"] for d in info["dependencies"]} == {
            f"tests/mini/torch:wheel@python={python}", f"tests/mini/flash_attention:wheel@python={python}"
        }
        assert all(f"-{tag}-" in d["wheel"] for d in info["dependencies"])

    plan = require_success(ws.pants("rocm-plan", "tests/mini/torch:wheel@python=3.12"), "the plan")
    assert "  python    CPython 3.12." in plan.stdout and "`python` = '3.12'" in plan.stdout

    patch = "tests/mini/patches/vllm/0001-report-gfx1151.patch"
    ws.write(patch, ws.read(patch).replace('"gfx1151"', '"gfx1151 (strix halo)"'))
    after_patch = require_success(ws.package(*variants("vllm")), "after a vllm patch edit")
    assert sorted(after_patch.built) == variants("vllm")  # one per Python


def test_the_interpreter_reached_through_another_path_shares_the_cache(ws, tmp_path) -> None:
    # The first checkout is the module's copy: the parametrized mini torch for 3.11 is what the
    # case before built there (a hit in file order, a build when this case runs alone).
    parametrize_python(ws)
    torch = "tests/mini/torch:wheel@python=3.11"
    require_success(ws.package(torch), "the first checkout")
    # Another checkout on the same store, whose pyenv root is a symlink: the same interpreters
    # at other paths.
    real_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv").resolve()
    linked_root = tmp_path / "another-pyenv"
    linked_root.symlink_to(real_root)
    b = Workspace(tmp_path / "checkout", ws.upstreams, ws.store, ws.named_caches)
    b.pants_env_extra["PYENV_ROOT"] = str(linked_root)
    parametrize_python(b)
    try:
        plan = require_success(b.pants("rocm-plan", torch), "the plan in the second")
        assert f"({linked_root}/versions/" in plan.stdout  # it really uses the other path
        again = require_success(b.package(torch), "the second checkout")
        assert again.built == []
    finally:
        b.stop()


def test_gpu_targets_parametrized(ws) -> None:
    build = "tests/mini/aotriton/BUILD"
    ws.write(build, ws.read(build).replace(
        'gpu_targets=["gfx1151"]', 'gpu_targets=parametrize(one=["gfx1151"], two=["gfx1100", "gfx1151"])'
    ))  # fmt: skip
    run = require_success(ws.package("tests/mini/aotriton:wheel@gpu_targets=one", "tests/mini/aotriton:wheel@gpu_targets=two"), "two gpu-target variants")
    assert sorted(run.built) == ["tests/mini/aotriton:wheel@gpu_targets=one", "tests/mini/aotriton:wheel@gpu_targets=two"]
    (one,) = ws.path("dist/tests.mini.aotriton@gpu_targets=one").glob("*.whl")
    (two,) = ws.path("dist/tests.mini.aotriton@gpu_targets=two").glob("*.whl")
    assert sorted(code_object_archs(one).values()) == ["gfx1151"] and "+llvm19gfx1151-" in unkeyed(one.name)
    assert sorted(code_object_archs(two).values()) == ["gfx1100", "gfx1151"] and "+llvm19gfx1100.gfx1151-" in unkeyed(two.name)
