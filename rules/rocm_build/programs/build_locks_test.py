"""How the pin programs have Pants write build locks (build_locks.py): by the lock's resolve of
`generate-lockfiles`, or by target where there is no lock yet."""

from __future__ import annotations

import os
from pathlib import Path

from rocm_build.programs.build_locks import LockState, refresh_commands, refresh_locks, resolve_of

NESTED = ["./pants", "--concurrent", "--no-dynamic-ui"]


def lock(path: str, pin: str = "mini-vllm") -> LockState:
    return LockState(Path(path), pin, "0" * 40, "tests/mini/vllm:wheel")


def test_a_lock_is_named_by_its_resolve_as_generate_lockfiles_names_it() -> None:
    assert resolve_of(lock("3rdparty/build/py3.11/mini-vllm.lock")) == "build:py3.11/mini-vllm"
    assert resolve_of(lock("./3rdparty/build/py3.12/vllm.lock")) == "build:py3.12/vllm"
    assert resolve_of(lock(os.path.abspath("3rdparty/build/py3.12/vllm.lock"))) == "build:py3.12/vllm"
    # A `lock` field outside 3rdparty/build keeps its whole path (goals/lockfiles.py).
    assert resolve_of(lock("locks/x.lock")) == "build:locks/x"


def test_existing_locks_go_through_generate_lockfiles_and_new_targets_through_the_alias() -> None:
    locks = [lock("3rdparty/build/py3.12/b.lock", "b"), lock("3rdparty/build/py3.11/a.lock", "a")]
    assert refresh_commands("./pants", locks, ["components:new"]) == [
        (2, [*NESTED, "generate-lockfiles", "--resolve=build:py3.11/a", "--resolve=build:py3.12/b"]),
        (1, [*NESTED, "lock-build-requirements", "components:new"]),
    ]
    assert refresh_commands("./pants", [], []) == []


def test_refresh_runs_pants_and_names_the_command_that_failed(tmp_path: Path, capsys) -> None:
    calls = tmp_path / "calls"
    pants = tmp_path / "pants"
    pants.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncase "$*" in *lock-build-requirements*) exit 3;; esac\n')
    pants.chmod(0o755)
    assert refresh_locks(str(pants), [lock("3rdparty/build/py3.11/a.lock", "a")]) is None
    assert calls.read_text() == "--concurrent --no-dynamic-ui generate-lockfiles --resolve=build:py3.11/a\n"
    assert f"refreshing 1 lock(s): {pants} generate-lockfiles --resolve=build:py3.11/a" in capsys.readouterr().out
    problem = refresh_locks(str(pants), [], ["c:new"])
    assert problem == f"`{pants} lock-build-requirements c:new` failed"
