"""upstream_choices_test as a user runs it: `pants test components/flash_attention:choices` in a
copy of the repository, on the pinned sdist and wheels served from this machine's mirror.

With our patch set flash-attention's backend sees gfx1151 as RDNA and the test passes; with the
sdist's `patches` field emptied (the sdist as PyPI has it) the same run fails, naming each case that
changed with the expected and the new choice, while gfx942's choices stay as stated. What each
upstream decides without our patches is also a test of the outer run, `:choices-unpatched` in
components/flash_attention and components/vllm (vLLM's sdist ranks ROCM_ATTN first on gfx1151,
issue 52's proof): a nested run here adds what only a user's run shows, the failure and its lines.
"""

from __future__ import annotations

import json

import pytest

from e2e.workspace import CACHE_ROOT, Workspace, borrowed
from kernels import make_mirror

CHOICES = "components/flash_attention:choices"
BUILD = "components/flash_attention/BUILD"
PATCHED = 'upstream_archive(name="sdist", pin="flash-attention-sdist", patches=["patches/flash_attention:gfx1151"])'


@pytest.fixture(scope="module")
def ws(tmp_path_factory, batch_copy):
    with borrowed(batch_copy, tmp_path_factory.mktemp("choices") / "upstreams") as workspace:
        workspace.pants_env_extra["PANTS_ROCM_BUILD_MIRRORS"] = repr(make_mirror.mirror(CACHE_ROOT / "kernel-mirror"))
        yield workspace


def test_without_our_patch_gfx1151_is_generic_and_the_test_names_the_changed_choices(ws: Workspace) -> None:
    listed = ws.read(BUILD)
    assert listed.count(PATCHED) == 1
    ws.write(BUILD, listed.replace(PATCHED, PATCHED.replace('["patches/flash_attention:gfx1151"]', "[]")))
    try:
        run = ws.pants("test", CHOICES)
    finally:
        ws.write(BUILD, listed)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    problems = [line for line in out.splitlines() if line.startswith("  - ")]
    assert problems == [
        "  - config_family@gfx1151: the choice changed: expected `rdna`, now `generic`",
        "  - autotune_fwd_prefill@gfx1151: the choice changed: expected `rdna configs (7)`, "
        "now `error: ValueError: Unknown Device Type`",
    ], out[-3000:]
    report = json.loads(ws.path("dist/test/components.flash_attention.choices/choices.json").read_text())
    assert report["targets"]["gfx942"]["choices"]["config_family"]["choice"] == "cdna"


def test_with_our_patch_gfx1151_takes_the_rdna_configs(ws: Workspace) -> None:
    run = ws.pants("test", CHOICES)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "components/flash_attention:choices: all 8 choice(s) as expected." in out
    report = json.loads(ws.path("dist/test/components.flash_attention.choices/choices.json").read_text())
    assert {t: r["choices"]["config_family"]["choice"] for t, r in report["targets"].items()} == {
        "gfx1151": "rdna", "gfx942": "cdna"}

