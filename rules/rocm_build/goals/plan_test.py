"""`rocm-plan` prints the process the build runs, without fetching or building anything.

One of the two test modules on the whole plugin (with check_test.py): it runs `rocm-plan` as a
user does, over a chain of two wheels, so what it proves includes register.py's wiring."""

from __future__ import annotations

from rocm_build.testutil.plugin_rules import whole_plugin_rule_runner
from rocm_build.testutil.git_fixtures import pins_toml
from rocm_build.goals.plan import RocmPlan


def test_plan_shows_chain_lock_archive_and_the_build_process() -> None:
    rule_runner = whole_plugin_rule_runner()
    rule_runner.write_files(
        {
            # Unreachable URLs: the plan must not fetch anything.
            "components/pins/all.toml": pins_toml(
                a={"url": "file:///nowhere/a", "track": "main", "commit": "a" * 40},
                b={"url": "file:///nowhere/b", "track": "main", "commit": "b" * 40},
            ),
            "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/nowhere')\n"
            "upstream_archive(name='data', url='https://example.invalid/d.tgz', sha256='')\n"
            "upstream_repo(name='a-src', pin='a')\nupstream_repo(name='b-src', pin='b')\n"
            "rocm_wheel(name='a', source=':a-src', toolchain=':llvm', archives={'DATA': ':data'})\n"
            "rocm_wheel(name='b', source=':b-src', toolchain=':llvm', dependencies=[':a'], kind='vllm',"
            " build_requirements=['six'], build_command=['echo hi'])\n",
        }
    )
    result = rule_runner.run_goal_rule(RocmPlan, args=["components:b"])
    assert result.exit_code == 0
    out = result.stdout
    assert out.index("[1] components:a") < out.index("[2] components:b")
    assert "  archive   DATA <- components:data" in out
    assert "  lock      3rdparty/build/py3.11/b.lock MISSING (run `pants lock-build-requirements components:b`)" in out
    assert "  network   none (own network namespace)" in out
    # The version's digest covers inputs known when built (the toolchain's identity, dependency wheels).
    labels = [line for line in out.splitlines() if line.startswith("  label     +")]
    assert len(labels) == 2 and all(".k<known when built> (the build writes +" in line for line in labels), labels
    assert "  rebuild   unknown: no wheel of it in dist/ to compare with (the build cache decides)" in out
    assert "  argv      /usr/bin/bash __rocm_build/build_wheel.sh" in out
    assert "    ROCM_PATH='$ROCM_BUILD_SANDBOX/.rocm/root'" in out
    assert "    DATA='$ROCM_BUILD_SANDBOX/.archives/DATA'" in out
    assert "    VLLM_TARGET_DEVICE=rocm" in out
    assert "    echo hi\n" in out
