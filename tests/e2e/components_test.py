"""The real components on a machine without ROCm: a plan, and a clear stop before any work."""

from __future__ import annotations

import pytest

from e2e.workspace import Workspace, make_fixture_upstreams, require_success


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("components")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    yield workspace
    workspace.stop()


def test_plan_lists_the_chain_in_build_order(ws: Workspace) -> None:
    run = require_success(ws.pants("rocm-plan", "components/vllm:wheel"), "rocm-plan")
    order = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("[")]
    assert order.index("components/aotriton:wheel") < order.index("components/torch:wheel")
    assert order.index("components/torch:wheel") < order.index("components/flash_attention:wheel")
    assert order[-1] == "components/vllm:wheel" and len(order) == 7
    assert "https://github.com/pytorch/pytorch.git @ cf30153c4c131c8164ee7798e5022d810682e2cb" in run.stdout
    assert "patches/flash_attention/0001-rdna-includes-gfx115x.edit.toml" in run.stdout
    assert "FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE" in run.stdout
    assert "python tools/use_existing_torch.py --prefix" in run.stdout
    assert "components/aiter:wheel  (optional)" in run.stdout
    # Torch on TheRock's SDK requires that SDK and a triton, as TheRock's own torch wheels do.
    torch_plan = run.stdout.split("components/torch:wheel", 1)[1].split("\n[", 1)[0]
    assert "PYTORCH_EXTRA_INSTALL_REQUIREMENTS='rocm[libraries]==10.0.0|triton'" in torch_plan


def test_missing_toolchain_stops_before_any_fetch(ws: Workspace) -> None:
    # An index nobody serves: what a machine without TheRock's SDK sees, without the network.
    original = ws.read("components/BUILD")
    on_this_machine = original.replace('environment="rocm-build-box"', 'environment="__local__"')
    ws.write("components/BUILD", on_this_machine.replace("https://stable.repo.amd.com/rocm/whl-next/", "http://127.0.0.1:9/"))
    try:
        run = ws.package("components/vllm:wheel")
    finally:
        ws.write("components/BUILD", original)
    assert run.returncode != 0
    assert (
        "components:rocm: the therock ROCm toolchain is missing: nothing usable at "
        "rocm[libraries,devel,device-gfx1151]==10.0.0 from http://127.0.0.1:9/"
    ) in run.stderr
    assert "To provide it: check `index_url` and `version`" in run.stderr
    assert "Fetching" not in run.stderr and "Building rocm_wheel" not in run.stderr
    assert not (ws.root / "dist").exists()


def test_the_unresolved_build_image_stops_before_any_fetch(ws: Workspace) -> None:
    # The chain builds in its image by default; its digest is not known here (no registry).
    run = ws.package("components/vllm:wheel")
    assert run.returncode != 0
    assert (
        "components:build-box: image localhost/rocm-pants/rocm-build-gfx1151 (environment rocm-build-box) "
        "is not resolved: it is not pinned by digest. Run `pants run rules:update-pins -- --resolve`: it builds it "
        "from components/images/rocm-build/Containerfile (where its base image's registry is reachable) and writes "
        "`localhost/rocm-pants/rocm-build-gfx1151@sha256:<digest>` as the `image` of components:build-box."
    ) in run.stderr
    assert "Fetching" not in run.stderr and "Building rocm_wheel" not in run.stderr
    assert not (ws.root / "dist").exists()
    plan = require_success(ws.pants("rocm-plan", "components/vllm:wheel"), "rocm-plan")
    assert "  environment NOT READY: components:build-box: image localhost/rocm-pants/rocm-build-gfx1151" in plan.stdout
