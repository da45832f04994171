"""rocm_toolchain: identity in the key, location out of it (Debian's clang-19 as the LLVM provider)."""

from __future__ import annotations

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain import rocm_sdk
from rocm_build.toolchain.rocm_sdk import ResolvedToolchain, ToolchainRequest
from rocm_build.toolchain.target_types import RocmToolchainTarget

LLVM = Address("tc", target_name="llvm")


@pytest.fixture
def rule_runner() -> RuleRunner:
    return isolated_rule_runner(
        rules=[*rocm_sdk.rules(), QueryRule(ResolvedToolchain, [ToolchainRequest])],
        target_types=[RocmToolchainTarget],
    )


def resolve(rule_runner: RuleRunner, path: str) -> ResolvedToolchain:
    rule_runner.write_files({"tc/BUILD": f"rocm_toolchain(name='llvm', provider='llvm', path='{path}')"})
    return rule_runner.request(ResolvedToolchain, [ToolchainRequest(LLVM, "test")])


def test_llvm_identity_is_the_compiler_not_its_path(rule_runner, tmp_path) -> None:
    direct = resolve(rule_runner, "/usr/lib/llvm-19")
    assert direct.identity.startswith("provider=llvm\nversion=\nDebian clang version 19.")
    assert "/usr/lib/llvm-19" not in direct.identity and direct.label == "llvm19"
    assert direct.clang == ".rocm/root/bin/clang"
    # The same compiler reached through another path: same identity, same build cache.
    (tmp_path / "elsewhere").symlink_to("/usr/lib/llvm-19")
    linked = resolve(rule_runner, str(tmp_path / "elsewhere"))
    assert (linked.identity, linked.cache_name) == (direct.identity, direct.cache_name)


def test_missing_toolchain_names_target_and_fix(rule_runner) -> None:
    with pytest.raises(ExecutionError) as e:
        resolve(rule_runner, "/nowhere/llvm")
    assert "tc:llvm: the llvm ROCm toolchain is missing: nothing usable at `path` '/nowhere/llvm'" in str(e.value)
    assert "apt-get install clang-19 lld-19 llvm-19" in str(e.value)
