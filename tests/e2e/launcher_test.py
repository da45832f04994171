"""Pants' official launcher: Pants' own `pants` entry point, without ./pants.

The official launcher (scie-pants) installs `pantsbuild.pants==<pants_version>` into a venv
of its own and runs its `pants`, with nothing of ours in the environment: no
ROCM_PANTS_CACHE, no plugin requirements in that venv. Here: such a venv (Pants from PyPI
only); the plugin's requirements come from `[GLOBAL] plugins` in pants.toml.

One stand-in, because GitHub is not reachable from this workplace: the official launcher's
Pants downloads the pex CLI from GitHub's releases; the test hands it the pex CLI ./pants
built, through Pants' own `PANTS_PEX_CLI_*` variables (what pants.offline.toml says for
./pants).
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from e2e.workspace import CACHE_ROOT, FIXTURE_WHEELS, Run, Workspace, make_fixture_upstreams, require_success

VLLM = "tests/mini/vllm:wheel"
CHAIN = ["tests/mini/aotriton:wheel", "tests/mini/torch:wheel", "tests/mini/flash_attention:wheel", VLLM]


def python39() -> str:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = sorted(root.glob("versions/3.9*/bin/python3.9")) + [Path(p) for p in ("/usr/bin/python3.9",) if Path(p).exists()]
    assert found, "Pants 2.17 needs CPython 3.9 (./setup checks for it)"
    return str(found[0])


@pytest.fixture(scope="module")
def official_pants(tmp_path_factory) -> Path:
    pants_version = tomllib.loads(Path("pants.toml").read_text())["GLOBAL"]["pants_version"]
    venv = tmp_path_factory.mktemp("launcher") / "venv"
    subprocess.run([python39(), "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", "--cert",
         "/etc/ssl/certs/ca-certificates.crt", f"pantsbuild.pants=={pants_version}"],
        check=True, env={**os.environ, "PIP_CONFIG_FILE": "/dev/null"},
    )  # fmt: skip
    for module in ("pydantic", "requests"):  # the plugin's requirements are not in it
        assert subprocess.run([str(venv / "bin/python"), "-c", f"import {module}"], capture_output=True).returncode != 0
    return venv / "bin/pants"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("official")
    workspace = Workspace(root / "checkout", make_fixture_upstreams(root / "upstreams"), root / "store", root / "named")
    yield workspace


def run_official(pants: Path, ws: Workspace, *args: str) -> Run:
    offline = tomllib.loads(ws.read("pants.offline.toml"))["pex-cli"]
    env = {
        "HOME": os.environ["HOME"],
        "PATH": "/usr/bin:/bin",
        "PYENV_ROOT": os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")),
        "NO_SCIE_WARNING": "1",
        # The stand-in for GitHub's pex release (see the module's docstring).
        "PANTS_PEX_CLI_URL_TEMPLATE": offline["url_template"].replace("%(env.ROCM_PANTS_CACHE)s", str(CACHE_ROOT)),
        "PANTS_PEX_CLI_KNOWN_VERSIONS": repr(offline["known_versions"]),
        # As the other tests: locked build requirements from the fixture wheels, no index.
        "PANTS_ROCM_BUILD_INDEX_URLS": "[]",
        "PANTS_ROCM_BUILD_FIND_LINKS": repr([str(FIXTURE_WHEELS)]),
    }
    argv = [str(pants), "--no-pantsd", "--no-dynamic-ui", f"--local-store-dir={ws.store}", f"--named-caches-dir={ws.named_caches}", *args]
    proc = subprocess.run(argv, cwd=ws.root, env=env, capture_output=True, text=True, timeout=900)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def test_the_official_entry_point_lists_and_builds_the_chain(official_pants, ws) -> None:
    listed = require_success(run_official(official_pants, ws, "list", "tests/mini::"), "list")
    assert "Resolving plugins: pydantic==1.10.19, requests==2.32.3" in listed.stderr
    assert set(CHAIN) <= set(listed.stdout.split())
    run = require_success(run_official(official_pants, ws, "package", VLLM), "package")
    assert sorted(run.built) == sorted(CHAIN)
    wheels = sorted(p.name for p in (ws.root / "dist").glob("*/*.whl"))
    assert [re.sub(r"-1\.0\.0[+-].*", "", w) for w in wheels] == [
        "mini_aotriton", "mini_flash_attention", "mini_rocm_sdk_core", "mini_rocm_sdk_device_gfx1151", "mini_torch", "mini_vllm"
    ]  # fmt: skip


def test_the_offline_launcher_refuses_a_pants_version_it_does_not_run(tmp_path: Path) -> None:
    # ./pants runs 2.17.1 only; a pants.toml moved to a newer Pants (docs/pants-versions.md)
    # needs the official launcher, and ./pants says so instead of running the wrong Pants.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pants").write_bytes(Path("pants").read_bytes())
    (checkout / "pants").chmod(0o755)
    (checkout / "pants.toml").write_text(Path("pants.toml").read_text().replace('pants_version = "2.17.1"', 'pants_version = "2.31.0"'))
    cache = tmp_path / "empty-cache"  # refused before any bootstrap: nothing is downloaded into it
    cache.mkdir()
    env = {**os.environ, "ROCM_PANTS_CACHE": str(cache)}
    run = subprocess.run(["./pants", "--version"], cwd=checkout, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and run.stdout == "" and list(cache.iterdir()) == []
    assert run.stderr.splitlines()[0] == "error: pants.toml asks for Pants 2.31.0; ./pants runs only 2.17.1 (from PyPI)."
    assert "docs/pants-versions.md" in run.stderr


def test_a_fresh_start_of_the_offline_launcher_is_quiet(ws) -> None:
    # Every new Pants process (here: no pantsd) imports Pants' packaging 21.3, which under the
    # pyparsing 3.3 pip picks by itself printed ten PyparsingDeprecationWarning blocks (30 lines)
    # before any output; ./pants pins pyparsing 3.2.5. Only its one-time bootstrap may speak.
    run = require_success(ws.pants("--no-pantsd", "help", "auditwheel"), "help auditwheel")
    bootstrap = ("Bootstrapping Pants ", "Building the pex CLI ")
    assert [line for line in run.stderr.splitlines() if not line.startswith(bootstrap)] == []
    # The tool's options, read with its built-in lock beside it (rocm_build/audits/auditwheel.lock).
    assert "auditwheel (https://github.com/pypa/auditwheel): the manylinux policy each built wheel meets." in run.stdout
    assert "current value: auditwheel (from pants.toml)" in run.stdout
