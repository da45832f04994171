"""A wheel's install for workload tests, run for real: this machine's Python 3.11 and the pinned
pip (downloaded from PyPI by its sha256), in a network namespace of its own, on a wheel made here
with a module and a console script."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest
from pants.engine.fs import CreateDigest, Digest, DigestContents, DigestEntries, FileContent, FileEntry
from pants.engine.rules import collect_rules
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.scripts.wheel_zip import record_line
from rocm_build.subsystems import bootstrap_wheels
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.testutil.workload_inputs import isolation_stand_in
from rocm_build.toolchain import interpreters
from rocm_build.toolchain.interpreters import BuildPython, BuildPythonRequest
from rocm_build.workloads import installed
from rocm_build.workloads.installed import InstalledWheels, InstallWheelsRequest

WHEEL = "tiny-1.0-py3-none-any.whl"


def tiny_wheel() -> bytes:
    """A wheel as a build backend writes one: a module, an entry point, RECORD with hashes."""
    files = {
        "tiny/__init__.py": b"def main():\n    print('tiny')\n",
        "tiny-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
        "tiny-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: installed_test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "tiny-1.0.dist-info/entry_points.txt": b"[console_scripts]\ntiny = tiny:main\n",
    }
    record = "".join(record_line(name, hashlib.sha256(data).digest(), len(data)) + "\n" for name, data in files.items())
    files["tiny-1.0.dist-info/RECORD"] = (record + "tiny-1.0.dist-info/RECORD,,\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return out.getvalue()


@pytest.fixture
def rule_runner() -> RuleRunner:
    runner = isolated_rule_runner(
        rules=[
            # The module's own rules and the real ones of what it asks for, but the network
            # setting's (on, as a stand-in: the install runs in a network namespace of its own).
            *collect_rules(vars(installed)),
            *bootstrap_wheels.rules(),
            *interpreters.rules(),
            isolation_stand_in,
            QueryRule(InstalledWheels, [InstallWheelsRequest]),
            QueryRule(BuildPython, [BuildPythonRequest]),
            QueryRule(Digest, [CreateDigest]),
            QueryRule(DigestContents, [Digest]),
            QueryRule(DigestEntries, [Digest]),
        ],
        # PyPI traffic (the pinned pip) passes an intercepting proxy (pants.toml's `ca_certs_path`).
        ca_certs_path="/etc/ssl/certs/ca-certificates.crt",
    )
    runner.set_options([], env_inherit={"PATH", "PYENV_ROOT", "HOME"})
    return runner


def test_a_wheel_installs_once_into_a_tree_without_this_sandboxs_paths(rule_runner: RuleRunner) -> None:
    python = rule_runner.request(BuildPython, [BuildPythonRequest("3.11", "up:kernels")])
    wheels = rule_runner.request(Digest, [CreateDigest([FileContent(WHEEL, tiny_wheel())])])
    made = rule_runner.request(InstalledWheels, [InstallWheelsRequest(wheels, python)])
    links = made.immutable_inputs()
    assert list(links) == ["site/tiny-1.0-py3-none-any"]
    files = {fc.path: fc.content for fc in rule_runner.request(DigestContents, [links["site/tiny-1.0-py3-none-any"]])}
    # pip's layout; no console script (its first line names the sandbox's Python) and no
    # direct_url.json (the wheel's path in the sandbox): the same bytes on every machine.
    assert sorted(files) == [
        "tiny-1.0.dist-info/INSTALLER", "tiny-1.0.dist-info/METADATA", "tiny-1.0.dist-info/RECORD",
        "tiny-1.0.dist-info/REQUESTED", "tiny-1.0.dist-info/WHEEL", "tiny-1.0.dist-info/entry_points.txt",
        "tiny/__init__.py",
    ]  # fmt: skip
    assert files["tiny/__init__.py"] == b"def main():\n    print('tiny')\n"
    assert not [path for path, data in files.items() if b"pants-sandbox" in data or b"/tmp/" in data]
