"""upstream_choices_test's inputs: the sdist served from 127.0.0.1 with the patch sets it carries
applied in order, and the errors that name the target and the fix. (The process itself runs in
tests/e2e/choices_test.py, on the real flash-attention sdist.)"""

from __future__ import annotations

import functools
import hashlib
import io
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.target import WrappedTarget, WrappedTargetRequest
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.choices import choices_rules
from rocm_build.choices.choices_rules import ChoicesTestRequest, ChoicesTree, UpstreamChoicesTestFieldSet
from rocm_build.choices.target_types import UpstreamChoicesTestTarget
from rocm_build.upstream.prebuilt_wheels import PrebuiltWheelsTarget
from rocm_build.upstream.target_types import PatchSetTarget, UpstreamArchiveTarget

CHOICES = Address("up", target_name="choices")
EDIT = '[[edit]]\npath = "up/platform.py"\npattern = "ROCM_ATTN"\nreplace = "TRITON_ATTN"\ncount = 1\n'


@pytest.fixture
def sdist(tmp_path: Path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"FIRST = 'ROCM_ATTN'\n"
        info = tarfile.TarInfo("up-1.0/up/platform.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    (tmp_path / "up-1.0.tar.gz").write_bytes(buf.getvalue())
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/up-1.0.tar.gz", hashlib.sha256(buf.getvalue()).hexdigest()
    httpd.shutdown()


@pytest.fixture
def rule_runner() -> RuleRunner:
    return RuleRunner(
        rules=[
            *choices_rules.rules(),
            QueryRule(ChoicesTree, [ChoicesTestRequest]),
            QueryRule(DigestContents, [Digest]),
            QueryRule(WrappedTarget, [WrappedTargetRequest]),
        ],
        target_types=[UpstreamChoicesTestTarget, UpstreamArchiveTarget, PatchSetTarget, PrebuiltWheelsTarget],
        isolated_local_store=True,
    )


def request(rule_runner: RuleRunner, build: str, sdist) -> ChoicesTestRequest:
    url, sha = sdist
    rule_runner.write_files({
        "up/BUILD": f"upstream_archive(name='sdist', url='{url}', sha256='{sha}', strip_prefix='up-1.0', patches=['patches/up:set'])\n"
                    "prebuilt_wheels(name='venv', pins_file='up/pins.toml', pins='none-*')\n" + build,
        "up/pins.toml": "",
        "up/choices_workload.py": "def cases():\n    return []\n",
        "patches/up/BUILD": "patch_set(name='set')\n",
        "patches/up/0002-second.edit.toml": EDIT.replace('replace = "TRITON_ATTN"', 'replace = "Y"').replace('pattern = "ROCM_ATTN"', 'pattern = "TRITON_ATTN"'),
        "patches/up/0001-first.edit.toml": EDIT,
    })  # fmt: skip
    target = rule_runner.request(WrappedTarget, [WrappedTargetRequest(CHOICES, "test")]).target
    return ChoicesTestRequest(UpstreamChoicesTestFieldSet.create(target))


def choices_build(source: str = ":sdist") -> str:
    return (f"upstream_choices_test(name='choices', source='{source}', "
            "workload='choices_workload.py', gpu_targets=['gfx1151', 'gfx942'], "
            "expected_choices={'first@*': 'TRITON_ATTN'})\n")


def test_the_sdist_with_the_patch_sets_it_carries_in_the_order_they_apply(rule_runner, sdist) -> None:
    tree = rule_runner.request(ChoicesTree, [request(rule_runner, choices_build(), sdist)])
    files = {fc.path: fc.content for fc in rule_runner.request(DigestContents, [tree.tree])}
    assert files == {"up/platform.py": b"FIRST = 'Y'\n"}  # 0001 made it TRITON_ATTN, then 0002 Y
    assert tree.patch_files == ("patches/up/0001-first.edit.toml", "patches/up/0002-second.edit.toml")


def test_a_source_that_is_a_wheel_set_is_refused_naming_what_it_takes(rule_runner, sdist) -> None:
    with pytest.raises(ExecutionError) as error:
        rule_runner.request(ChoicesTree, [request(rule_runner, choices_build(source=":venv"), sdist)])
    assert ("the `source` field of up:choices names up:venv, a `prebuilt_wheels`; it takes an `upstream_archive` "
            "or `upstream_repo` (the choices are read from the upstream's Python, not a built wheel)") in str(error.value)
