"""A RuleRunner on a local store and named caches of its own: the one way the plugin's tests
build one (rules/rocm_build/testutil/isolated_rule_runner_test.py checks that none is built
otherwise).

Pants' RuleRunner runs processes in the developer's named caches (~/.cache/pants/named_caches)
unless told otherwise, and some of ours write there what every Pants on the machine reads. The
mirror table is one (upstream/mirror_table.py writes it once per session): a unit test that ran
the mirror step with no mirrors removed the table the outer `pants test ::` had written from
.pants.rc, and the outer run's later fetches went to the origins, out of this workplace's reach
(CI, 2026-11-29: `components/kernels:build-venv#kernels-torch` could not be downloaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from pants.testutil.rule_runner import RuleRunner
from pants.util.dirutil import safe_mkdtemp


class _OwnNamedCachesRuleRunner(RuleRunner):
    """Its named caches named again on every `set_options`: Pants' set_options makes the options
    from the args it is given alone, so a rule that reads `named_caches_dir` (ccache's, sccache's
    farm) would read and write the developer's folder while the runner's processes use this one."""

    def __init__(self, named_caches: Path, **options: Any) -> None:
        self.named_caches_arg = f"--named-caches-dir={named_caches}"
        super().__init__(**options)

    def set_options(self, args: Iterable[str], *, env: Optional[Mapping[str, str]] = None, env_inherit: Optional[set] = None) -> None:
        super().set_options([self.named_caches_arg, *args], env=env, env_inherit=env_inherit)


def isolated_rule_runner(*, named_caches: Optional[Path] = None, bootstrap_args: Iterable[str] = (), **options: Any) -> RuleRunner:
    """A RuleRunner (`options` go to it) whose processes see a store and named caches no other
    Pants shares, before and after `set_options`: `named_caches` where a test reads what its
    processes left there, else a temporary directory removed at exit (as Pants removes an
    isolated store's)."""
    named = named_caches if named_caches is not None else Path(safe_mkdtemp(prefix="rule_runner_named_caches."))
    return _OwnNamedCachesRuleRunner(
        named,
        bootstrap_args=[f"--named-caches-dir={named}", *bootstrap_args],
        isolated_local_store=True,
        **options,
    )
