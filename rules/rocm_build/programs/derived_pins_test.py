"""update-pins moving the chain from its top: pins derived from a line of another pin's recipe
(a Dockerfile ARG naming a short SHA or a tag, as vLLM's docker/Dockerfile.rocm_base does),
on real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocm_build.programs.update_pins import main
from rocm_build.testutil.git_fixtures import commit_files, git, init_repo

DOCKERFILE = 'ARG BASE_IMAGE=rocm/dev-ubuntu-22.04:7.2.3-complete\nARG PYTORCH_BRANCH="{torch}" # release/2.13\nARG PYTORCH_VISION_BRANCH="{vision}"\n'


@pytest.fixture
def chain(tmp_path: Path):
    torch, vision, vllm = (init_repo(tmp_path / n) for n in ("torch", "vision", "vllm"))
    torch_1 = commit_files(torch, {"version.txt": "2.13.0a0\n"})
    torch_2 = commit_files(torch, {"version.txt": "2.13.0\n"})
    vision_1 = commit_files(vision, {"version.txt": "0.28.0\n"})
    git(vision, "tag", "-a", "-m", "v0.28.0", "v0.28.0")
    vllm_1 = commit_files(vllm, {"docker/Dockerfile.rocm_base": DOCKERFILE.format(torch=torch_1[:7], vision="v0.28.0")})
    pins = tmp_path / "pins.toml"
    pins.write_text(
        f'[vllm]\nurl = "file://{vllm}"\ntrack = "main"\ncommit = "{vllm_1}"\n\n'
        f'[torch]\nurl = "file://{torch}"\ntrack = "{torch_1[:7]}"\ncommit = "{torch_1}"\n'
        'derived_from = "vllm:docker/Dockerfile.rocm_base#PYTORCH_BRANCH"\n\n'
        f'[vision]\nurl = "file://{vision}"\ntrack = "v0.28.0"\ncommit = "{vision_1}"\n'
        'derived_from = "vllm:docker/Dockerfile.rocm_base#PYTORCH_VISION_BRANCH"\n'
    )
    return tmp_path, pins, (torch, vision, vllm), (torch_1, torch_2, vision_1, vllm_1)


def run(tmp_path: Path, pins: Path, *extra: str) -> int:
    (tmp_path / "locks").mkdir(exist_ok=True)
    return main(["--pins-file", str(pins), "--patches-dir", str(tmp_path / "patches"), "--locks-dir", str(tmp_path / "locks"),
                 "--archives-file", str(tmp_path / "archives.toml"), "--no-patch-check", *extra])  # fmt: skip


def test_moving_the_top_pin_moves_what_its_recipe_names(chain, capsys) -> None:
    tmp_path, pins, (torch, vision, vllm), (torch_1, torch_2, vision_1, vllm_1) = chain
    assert run(tmp_path, pins) == 0
    assert "all pins are up to date" in capsys.readouterr().out
    # vLLM moves; its Dockerfile now names another torch (short SHA) and another vision (a tag).
    vision_2 = commit_files(vision, {"version.txt": "0.29.0\n"})
    git(vision, "tag", "v0.29.0")
    vllm_2 = commit_files(vllm, {"docker/Dockerfile.rocm_base": DOCKERFILE.format(torch=torch_2[:8], vision="v0.29.0")})
    before = pins.read_text()
    assert run(tmp_path, pins) == 0
    out = capsys.readouterr().out
    assert f"vllm: {vllm_1[:12]} -> {vllm_2[:12]} (main moved)" in out
    assert (
        f"torch: {torch_1[:12]} -> {torch_2[:12]} (docker/Dockerfile.rocm_base line 2 of vllm {vllm_2[:12]} "
        f'(`ARG PYTORCH_BRANCH="{torch_2[:8]}" # release/2.13`) names {torch_2[:8]})'
    ) in out
    assert f"vision: {vision_1[:12]} -> {vision_2[:12]}" in out
    assert pins.read_text() == (
        before.replace(vllm_1, vllm_2).replace(torch_1, torch_2).replace(f'track = "{torch_1[:7]}"', f'track = "{torch_2[:8]}"')
        .replace(vision_1, vision_2).replace('track = "v0.28.0"', 'track = "v0.29.0"')
    )  # fmt: skip


def test_a_recipe_naming_a_ref_that_does_not_exist_refuses_the_whole_move(chain, capsys) -> None:
    tmp_path, pins, (_, _, vllm), _ = chain
    commit_files(vllm, {"docker/Dockerfile.rocm_base": DOCKERFILE.format(torch="deadbee", vision="v0.28.0")})
    before = pins.read_text()
    assert run(tmp_path, pins) == 1
    assert pins.read_text() == before
    err = capsys.readouterr().err
    assert "update-pins: docker/Dockerfile.rocm_base line 2 of vllm " in err
    assert "names 'deadbee' for [torch]: [torch] the short SHA deadbee names no commit of file://" in err
    assert err.rstrip().endswith("the pins file was not changed.")


def test_a_recipe_that_no_longer_names_a_derived_pin_refuses_the_move(chain, capsys) -> None:
    """vLLM 0.33.0's Dockerfile.rocm_base builds on TheRock's torchvision wheel: it sets
    TORCHVISION_VERSION, no PYTORCH_VISION_BRANCH (read in its PyPI sdist)."""
    tmp_path, pins, (_, _, vllm), (torch_1, _, _, _) = chain
    recipe = f'ARG PYTORCH_BRANCH="{torch_1[:7]}"\nARG TORCHVISION_VERSION=0.28.0+rocm10.0.0\n'
    vllm_2 = commit_files(vllm, {"docker/Dockerfile.rocm_base": recipe})
    before = pins.read_text()
    assert run(tmp_path, pins) == 1
    assert pins.read_text() == before
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        'update-pins: [vision] `derived_from = "vllm:docker/Dockerfile.rocm_base#PYTORCH_VISION_BRANCH"`: '
        f"docker/Dockerfile.rocm_base of vllm does not set PYTORCH_VISION_BRANCH at vllm {vllm_2[:12]}; nothing was "
        "moved and the pins file was not changed. Point `derived_from` of [vision] at what that recipe names now, or "
        "pin [vision] by hand without it."
    )
