"""A build's preparation requests its independent inputs together: against stand-in servers on
127.0.0.1 that answer each download after the same delay (GitHub's: git http-backend, an
archive's host, a PEP 503 index for the lock's wheels), a first build's preparation takes about
the longest download, not their sum."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
import zipfile
from pathlib import Path

from pants.engine.addresses import Address
from pants.testutil.rule_runner import QueryRule

from e2e.git_http_server import serving_git
from e2e.http_server import serving
from rocm_build.subsystems.bootstrap_wheels import BootstrapWheels
from rocm_build.testutil.git_fixtures import commit_files, init_repo, pins_toml
from rocm_build.locks import lockfile
from rocm_build.build import build
from rocm_build.prepare.inputs import BuildHost, BuildHostRequest, PreparedWheelBuild
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.toolchain.target_types import RocmToolchainTarget
from rocm_build.upstream.target_types import UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.wheel.build_spec import WheelBuildSpec, WheelRequest
from rocm_build.wheel.target_types import RocmWheelTarget

WHEEL = Address("components/mini", target_name="wheel")
DELAY = 8.0  # seconds, for each of the three downloads
DEP = "mini_dep-1.0-py3-none-any.whl"


def a_wheel() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mini_dep/__init__.py", "")
        zf.writestr("mini_dep-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mini-dep\nVersion: 1.0\n")
        zf.writestr("mini_dep-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("mini_dep-1.0.dist-info/RECORD", "")
    return buf.getvalue()


def a_tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("extra/README")
        info.size = 6
        tf.addfile(info, io.BytesIO(b"extra\n"))
    return buf.getvalue()


def served_files(root: Path) -> tuple[str, str]:
    """The archive and the lock's wheel, as their hosts serve them; returns their sha256."""
    (root / "simple/mini-dep").mkdir(parents=True)
    (root / DEP).write_bytes(a_wheel())
    (root / "extra.tar.gz").write_bytes(a_tarball())
    wheel_sha = hashlib.sha256((root / DEP).read_bytes()).hexdigest()
    (root / "simple/mini-dep/index.html").write_text(f'<a href="../../{DEP}#sha256={wheel_sha}">{DEP}</a>\n')
    return hashlib.sha256((root / "extra.tar.gz").read_bytes()).hexdigest(), wheel_sha


def test_a_first_build_downloads_its_independent_inputs_at_once(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "github/mini")
    commit = commit_files(repo, {"setup.py": "from setuptools import setup\nsetup(name='mini')\n"}, "first")
    archive_sha, wheel_sha = served_files(tmp_path / "served")
    lock = lockfile.BuildLock(
        pin="mini", commit=commit, python="3.11", requirements=("mini-dep==1.0",), files=(),
        dists=(lockfile.LockedDist("mini-dep", "1.0", wheel_sha, DEP),), left_out=(),
        regenerate="pants lock-build-requirements components/mini:wheel",
    )  # fmt: skip
    runner = isolated_rule_runner(
        rules=[
            *build.rules(),
            QueryRule(WheelBuildSpec, [WheelRequest]),
            QueryRule(BootstrapWheels, []),
            QueryRule(BuildHost, [BuildHostRequest]),
            QueryRule(PreparedWheelBuild, [WheelRequest]),
        ],
        target_types=[RocmWheelTarget, UpstreamRepoTarget, UpstreamArchiveTarget, RocmToolchainTarget],
        # PyPI traffic (the bootstrap wheels) passes an intercepting proxy (pants.toml's `ca_certs_path`).
        ca_certs_path="/etc/ssl/certs/ca-certificates.crt",
        named_caches=tmp_path / "named",  # a first run: no pip cache
        bootstrap_args=[
            # Every download is a process (git, pip, fetch_archive.py), and Pants runs as many
            # processes at once as the machine has cores: as on a build box, not CI's 2 cores.
            "--process-execution-local-parallelism=4",
        ],
    )
    with serving_git(tmp_path / "github", delay=DELAY) as (git_url, fetched), serving(tmp_path / "served", delay=DELAY) as (http_url, seen):
        runner.set_options(
            [
                f'--rocm-build-mirrors={{"https://github.com/rocm-pants-mini/": "{git_url}/"}}',
                f"--python-repos-indexes=['{http_url}/simple/']",
            ],
            env_inherit={"PATH"},
        )
        runner.write_files(
            {
                "components/pins/mini.toml": pins_toml(mini={"url": "https://github.com/rocm-pants-mini/mini", "track": "main", "commit": commit}),
                "components/BUILD": "rocm_toolchain(name='llvm', provider='llvm', path='/usr/lib/llvm-19')\n"
                f"upstream_archive(name='extra', url='{http_url}/extra.tar.gz', sha256='{archive_sha}', strip_prefix='extra')\n",
                "components/mini/BUILD": "upstream_repo(name='src', pin='mini')\n"
                "rocm_wheel(name='wheel', source=':src', toolchain='components:llvm', gpu_targets=['gfx1151'], kind='vllm',\n"
                "    build_requirements=['mini-dep==1.0'], archives={'EXTRA': 'components:extra'})\n",
                "3rdparty/build/py3.11/mini.lock": lockfile.render(lock),
            }
        )
        # What no stand-in serves, first: PyPI's bootstrap wheels, this machine's Python and toolchain.
        spec = runner.request(WheelBuildSpec, [WheelRequest(WHEEL)])
        runner.request(BootstrapWheels, [])
        runner.request(BuildHost, [BuildHostRequest(spec)])
        start = time.monotonic()
        prepared = runner.request(PreparedWheelBuild, [WheelRequest(WHEEL)])
        measured = time.monotonic() - start

    # Each input came from its stand-in, each download once, each after the delay.
    assert fetched == ["/mini"]
    downloads = sorted(p for p in seen if not p.endswith("/"))
    assert downloads == ["/extra.tar.gz", f"/{DEP}"]
    info = json.loads(prepared.build_info)
    assert info["build_requirements"]["distributions"] == ["mini-dep==1.0"]
    # By the file and sha256 the lock pins, for the wheel's SBOM.
    assert info["build_requirements"]["wheels"] == [{"name": "mini-dep", "version": "1.0", "file": DEP, "sha256": wheel_sha}]
    assert info["archives"]["EXTRA"]["sha256"] == archive_sha
    assert info["source"]["commit"] == commit
    total = DELAY * (len(fetched) + len(downloads))
    print(f"3 downloads of {DELAY:.0f} s each: their sum {total:.0f} s, the longest {DELAY:.0f} s; the preparation took {measured:.1f} s")
    # In sequence it would take the sum and more. The margin, half the sum's excess over the
    # longest, is for the local work around the downloads on a loaded machine (pip alone takes
    # seconds to start before it asks for the wheel).
    assert DELAY <= measured < DELAY + (total - DELAY) / 2, f"the preparation took {measured:.1f} s: the downloads ran in sequence"
