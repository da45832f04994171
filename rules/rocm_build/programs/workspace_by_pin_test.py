"""`pants run rules:patch-workspace` (workspace_by_pin.py): the pin's target found by a nested
`peek`, then the goal run on it, with a stand-in `./pants` that logs what it is asked."""

from __future__ import annotations

import json
from pathlib import Path

from rocm_build.programs.workspace_by_pin import main

PEEKED = [
    {"address": "tests/mini/vllm:src", "target_type": "upstream_repo", "pin": "mini-vllm"},
    {"address": "components/fa:sdist", "target_type": "upstream_archive", "pin": "fa"},
    {"address": "components/fa:src", "target_type": "upstream_repo", "pin": "fa"},
    {"address": "components/x:src", "target_type": "upstream_archive", "pin": None},
]
NESTED = "--concurrent --no-dynamic-ui"


def fake_pants(tmp_path: Path, goal_exit: int = 0) -> tuple:
    calls, peeked = tmp_path / "calls", tmp_path / "peeked.json"
    peeked.write_text(json.dumps(PEEKED))
    pants = tmp_path / "pants"
    pants.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f'case "$*" in *" peek "*) cat {peeked};; *) echo "the goal ran"; exit {goal_exit};; esac\n'
    )
    pants.chmod(0o755)
    return str(pants), calls


def test_the_pin_is_found_among_the_upstream_targets_and_the_goal_runs_on_it(tmp_path: Path, capfd) -> None:
    pants, calls = fake_pants(tmp_path)
    assert main(["checkout", "mini-vllm", "--pants", pants]) == 0
    assert main(["save", "mini-vllm", "--pants", pants, "--patch-set", "tests/mini/patches/vllm:gfx1151"]) == 0
    assert calls.read_text().splitlines() == [
        f"{NESTED} --filter-target-type=upstream_repo,upstream_archive peek ::",
        f"{NESTED} patch-workspace tests/mini/vllm:src",
        f"{NESTED} --filter-target-type=upstream_repo,upstream_archive peek ::",
        f"{NESTED} patch-workspace --save --patch-workspace-patch-set=tests/mini/patches/vllm:gfx1151 tests/mini/vllm:src",
    ]
    out = capfd.readouterr().out
    assert out == (
        f"{pants} patch-workspace tests/mini/vllm:src\nthe goal ran\n"
        f"{pants} patch-workspace --save --patch-workspace-patch-set=tests/mini/patches/vllm:gfx1151 tests/mini/vllm:src\n"
        "the goal ran\n"
    )


def test_the_goals_exit_code_is_the_programs(tmp_path: Path) -> None:
    pants, _ = fake_pants(tmp_path, goal_exit=1)
    assert main(["save", "mini-vllm", "--pants", pants]) == 1


def test_a_pin_of_no_target_or_of_several_is_refused_before_the_goal(tmp_path: Path, capfd) -> None:
    pants, calls = fake_pants(tmp_path)
    assert main(["checkout", "nope", "--pants", pants]) == 1
    assert capfd.readouterr().err == "patch-workspace: no upstream_repo or upstream_archive target has pin='nope'\n"
    assert main(["checkout", "fa", "--pants", pants]) == 1
    assert capfd.readouterr().err == (
        "patch-workspace: pin fa is the source of 2 targets (components/fa:sdist, components/fa:src); "
        "name the one to use: ./pants patch-workspace components/fa:sdist\n"
    )
    assert [line.split()[-2:] for line in calls.read_text().splitlines()] == [["peek", "::"], ["peek", "::"]]
