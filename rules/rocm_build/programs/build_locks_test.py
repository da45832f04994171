"""How the pin programs have Pants write build locks (build_locks.py): by the lock's resolve of
`generate-lockfiles`, or by target where there is no lock yet; and `rules:lock-build-requirements`
picking the locks by pin name."""

from __future__ import annotations

import os
from pathlib import Path

from rocm_build.locks import lockfile
from rocm_build.programs.build_locks import LockState, main, refresh_commands, refresh_locks, resolve_of

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


def fake_pants(tmp_path: Path) -> tuple:
    calls = tmp_path / "calls"
    pants = tmp_path / "pants"
    pants.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    pants.chmod(0o755)
    return pants, calls


def write_lock(locks_dir: Path, python: str, pin: str) -> None:
    text = lockfile.render(lockfile.BuildLock(pin, "1" * 40, python, (), (), (), regenerate=f"pants lock-build-requirements c/{pin}:wheel"))
    (locks_dir / f"py{python}").mkdir(parents=True, exist_ok=True)
    (locks_dir / f"py{python}" / f"{pin}.lock").write_text(text)


def test_the_program_picks_locks_by_pin_and_has_the_goals_write_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    pants, calls = fake_pants(tmp_path)
    locks_dir = tmp_path / "3rdparty" / "build"
    write_lock(locks_dir, "3.11", "a")
    write_lock(locks_dir, "3.12", "a")
    write_lock(locks_dir, "3.12", "b")
    assert main(["--only", "a", "--pants", str(pants)]) == 0
    assert calls.read_text() == "--concurrent --no-dynamic-ui generate-lockfiles --resolve=build:py3.11/a --resolve=build:py3.12/a\n"
    calls.unlink()
    # No pin and no target: every lock there; a target: only the alias by target.
    assert main(["--pants", str(pants)]) == 0
    assert calls.read_text().split()[-3:] == ["--resolve=build:py3.11/a", "--resolve=build:py3.12/a", "--resolve=build:py3.12/b"]
    calls.unlink()
    assert main(["c/new:wheel", "--pants", str(pants)]) == 0
    assert calls.read_text() == "--concurrent --no-dynamic-ui lock-build-requirements c/new:wheel\n"


def test_a_pin_without_a_lock_is_refused_before_pants_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    pants, calls = fake_pants(tmp_path)
    write_lock(tmp_path / "3rdparty" / "build", "3.11", "a")
    assert main(["--only", "a", "nope", "--pants", str(pants)]) == 1
    assert capsys.readouterr().err == (
        "lock-build-requirements: no lock in 3rdparty/build for pin(s) nope; name the rocm_wheel target instead\n"
    )
    assert not calls.exists()
