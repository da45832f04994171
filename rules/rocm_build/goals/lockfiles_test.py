"""The rocm_wheel locks as `pants generate-lockfiles` resolves: their names, beside Pants' own
Python resolves, and the bytes written, the same as the old goals write (real pip, a local
find-links directory of stub wheels, no index)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest
from pants.core.goals import generate_lockfiles
from pants.core.goals.generate_lockfiles import GenerateLockfilesGoal, KnownUserResolveNames, UserGenerateLockfiles
from pants.engine.addresses import Address
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from rocm_build.goals import lock_build_requirements, lock_runtime_requirements, lockfiles
from rocm_build.goals.lock_build_requirements import LockBuildRequirements
from rocm_build.goals.lock_runtime_requirements import LockRuntimeRequirements
from rocm_build.goals.lockfiles import GenerateRocmLockfile, KnownRocmLockNamesRequest, RequestedRocmLockNames
from rocm_build.install.chain_stubs import stub_wheel
from rocm_build.locks.lockfile import resolve_name
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import UpstreamRepoTarget
from rocm_build.wheel.target_types import RocmWheelTarget

BUILD = """\
rocm_toolchain(name='llvm', provider='llvm', path='/nowhere')
upstream_repo(name='a-src', pin='a')
upstream_repo(name='b-src', pin='b')
rocm_wheel(name='a', source=':a-src', toolchain=':llvm', build_requirements=['six'])
rocm_wheel(name='a-too', source=':a-src', toolchain=':llvm', build_requirements=['six'])
rocm_wheel(name='b', source=':b-src', toolchain=':llvm', dependencies=[':a'], runtime_requirements=['six'])
rocm_wheel(name='b-sdk', source=':b-src', toolchain=':llvm', runtime_requirements=['amdsmi'])
rocm_wheel(name='c', source=':b-src', toolchain=':llvm', python='3.12', build_requirements=['six'], lock='locks/c.lock')
"""


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = isolated_rule_runner(
        # Our members of `generate-lockfiles`, the goal itself, and the two goals whose bytes it must write.
        rules=[
            *lockfiles.rules(),
            *generate_lockfiles.rules(),
            *lock_build_requirements.rules(),
            *lock_runtime_requirements.rules(),
            QueryRule(KnownUserResolveNames, [KnownRocmLockNamesRequest]),
            QueryRule(UserGenerateLockfiles, [RequestedRocmLockNames]),
        ],
        target_types=[RocmWheelTarget, UpstreamRepoTarget, RocmToolchainTarget],
        # The engine downloads the build venv's pip (PyPI, through this machine's proxy).
        ca_certs_path="/etc/ssl/certs/ca-certificates.crt",  # as pants.toml says
    )
    runner.write_files(
        {
            # Unreachable URLs: no lock here needs the tree (no `-r` file).
            "components/pins/all.toml": pins_toml(
                a={"url": "file:///nowhere/a", "track": "main", "commit": "a" * 40},
                b={"url": "file:///nowhere/b", "track": "main", "commit": "b" * 40},
            ),
            "components/BUILD": BUILD,
        }
    )
    return runner


def test_resolve_names_are_the_lock_paths_by_kind() -> None:
    assert resolve_name("build", "3rdparty/build/py3.11/mini-vllm.lock") == "build:py3.11/mini-vllm"
    assert resolve_name("run", "3rdparty/run/py3.12/vllm.wheel-on-therock.lock") == "run:py3.12/vllm.wheel-on-therock"
    assert resolve_name("build", "locks/c.lock") == "build:locks/c"


def test_every_lock_is_one_resolve_and_targets_sharing_a_lock_share_it(rule_runner: RuleRunner) -> None:
    known = rule_runner.request(KnownUserResolveNames, [KnownRocmLockNamesRequest()])
    # b-sdk asks only for an SDK module: nothing of it is locked, so it has no resolve. A run-time
    # lock of a target not named `wheel` has the name in its file name (runtime_lock.py).
    assert known.names == ("build:locks/c", "build:py3.11/a", "run:py3.11/b.b")
    assert known.requested_resolve_names_cls is RequestedRocmLockNames
    requests = rule_runner.request(UserGenerateLockfiles, [RequestedRocmLockNames(["build:py3.11/a", "run:py3.11/b.b"])])
    assert list(requests) == [
        GenerateRocmLockfile(
            resolve_name="build:py3.11/a", lockfile_dest="3rdparty/build/py3.11/a.lock", diff=False, kind="build",
            owners=(Address("components", target_name="a"), Address("components", target_name="a-too")),
        ),
        GenerateRocmLockfile(
            resolve_name="run:py3.11/b.b", lockfile_dest="3rdparty/run/py3.11/b.b.lock", diff=False, kind="run",
            owners=(Address("components", target_name="b"),),
        ),
    ]  # fmt: skip


def _resolving(tmp_path: Path) -> Dict[str, Any]:
    """run_goal_rule's options: pip resolves from a directory of stub wheels, no index."""
    links = tmp_path / "links"
    links.mkdir()
    for name, version in (("six", "1.16.0"), ("six", "1.15.0")):
        filename, data = stub_wheel(name, version)
        (links / filename).write_bytes(data)
    return dict(
        global_args=[
            "--python-repos-indexes=[]", f"--python-repos-find-links=['{links}']",
            "--python-bootstrap-search-path=['<PYENV>', '<PATH>']",
        ],
        env_inherit={"PATH", "PYENV_ROOT", "HOME"},
    )  # fmt: skip


def test_generate_lockfiles_writes_the_bytes_the_old_goals_write(rule_runner: RuleRunner, tmp_path: Path) -> None:
    options = _resolving(tmp_path)
    build, run = Path(rule_runner.build_root, "3rdparty/build/py3.11/a.lock"), Path(rule_runner.build_root, "3rdparty/run/py3.11/b.b.lock")
    assert rule_runner.run_goal_rule(LockBuildRequirements, args=["components:a"], **options).exit_code == 0
    assert rule_runner.run_goal_rule(LockRuntimeRequirements, args=["components:b"], **options).exit_code == 0
    old_build, old_run = build.read_bytes(), run.read_bytes()
    build.unlink()
    run.unlink()
    result = rule_runner.run_goal_rule(GenerateLockfilesGoal, args=["--resolve=build:py3.11/a", "--resolve=run:py3.11/b.b"], **options)
    assert result.exit_code == 0
    assert build.read_bytes() == old_build
    assert run.read_bytes() == old_run
    # The header still names the alias goal: the same lock, made by either.
    assert old_build.decode().splitlines()[1:5] == [
        "# regenerate: pants lock-build-requirements components:a",
        f"# pin: a {'a' * 40}",
        "# python: 3.11",
        "# requirement: six",
    ]
    assert "six==1.16.0 --hash=sha256:" in old_build.decode() and "six==1.16.0 --hash=sha256:" in old_run.decode()
    assert not Path(rule_runner.build_root, "locks/c.lock").exists()  # not asked for


def test_an_unknown_resolve_names_every_lock(rule_runner: RuleRunner) -> None:
    with pytest.raises(Exception) as e:
        rule_runner.run_goal_rule(GenerateLockfilesGoal, args=["--resolve=build:py3.11/nope"])
    assert (
        "Unrecognized resolve name from the option `--generate-lockfiles-resolve`: build:py3.11/nope\n\n"
        "All valid resolve names: ['build:locks/c', 'build:py3.11/a', 'run:py3.11/b.b']"
    ) in str(e.value)
