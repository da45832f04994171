from __future__ import annotations

import functools
import hashlib
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from rocm_build.pins.tables import PrebuiltPin
from rocm_build.pins.update.prebuilt_index import IndexFile, fits, newest, requires_rocm
from rocm_build.prebuilt import wheel_rules
from rocm_build.prebuilt.wheel_rules import FetchedPrebuilt, PrebuiltRequest, PrebuiltSpec
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream.target_types import PrebuiltWheelTarget

INDEX = "https://rocm.nightlies.amd.com/v2/gfx1151/"
FILE = "mini_torch-1.0-py3-none-any.whl"
GOOD_HASH = "qDELPlksFSwWLqsldfcO3h82HUM9qbRemTxcdjn1Jb8"  # of b"VERSION = '1.0'\n", as RECORD writes it


def pin(**fields: str) -> PrebuiltPin:
    return PrebuiltPin(index_url=INDEX, project="torch", track=">=2.13.0a0,<2.14", python="3.12", **fields)


def test_an_unresolved_pin_and_a_rocm_mismatch_are_named() -> None:
    spec = PrebuiltSpec(Address("components/therock", target_name="torch"), "therock-torch", pin(), "components/pins.toml")
    assert spec.unresolved() == (
        "prebuilt_wheel components/therock:torch: pin `therock-torch` ([prebuilt.therock-torch] in components/pins.toml) "
        "is not resolved: it has no version, file and sha256 yet. Run `pants run rules:update-pins -- --only "
        f"therock-torch` where the index ({INDEX}) is reachable; never write a sha256 you have not checked."
    )
    resolved = PrebuiltSpec(
        spec.address, spec.pin_name,
        pin(version="2.13.0a0+rocm7.13.0", file="torch-2.13.0a0+rocm7.13.0-cp312-cp312-linux_x86_64.whl",
            sha256="a" * 64, requires_rocm="7.13.0"),
        spec.pins_file,
    )  # fmt: skip
    assert resolved.unresolved() is None
    assert resolved.rocm_mismatch("components/vllm:wheel-on-therock", "components:rocm", "7.13.0") is None
    assert resolved.rocm_mismatch("components/vllm:wheel-on-therock", "components:rocm", "7.14.0") == (
        "components/vllm:wheel-on-therock builds against prebuilt_wheel components/therock:torch (torch "
        "2.13.0a0+rocm7.13.0), which requires rocm==7.13.0, but its rocm_toolchain components:rocm is version "
        "7.14.0. Set components:rocm's `version` to 7.13.0, or move the pin `therock-torch` ([prebuilt.therock-torch] "
        "in components/pins.toml) to a wheel built for that ROCm."
    )


def test_update_pins_takes_the_newest_file_for_the_python_and_track() -> None:
    files = [
        IndexFile(f"torch-{v}-{t}.whl", f"https://x/torch-{v}-{t}.whl", None, None)
        for v, t in [
            ("2.13.0a0+rocm7.14.0a20261120", "cp312-cp312-linux_x86_64"),
            ("2.13.0a0+rocm7.14.0a20261122", "cp312-cp312-manylinux_2_28_x86_64"),
            ("2.13.0a0+rocm7.14.0a20261123", "cp311-cp311-linux_x86_64"),  # another Python
            ("2.14.0a0+rocm7.14.0a20261123", "cp312-cp312-linux_x86_64"),  # outside track
            ("2.13.0a0+rocm7.14.0a20261124", "cp312-cp312-win_amd64"),  # another platform
        ]
    ]
    version, chosen = newest(pin(), files)
    assert str(version) == "2.13.0a0+rocm7.14.0a20261122"
    assert chosen.name == "torch-2.13.0a0+rocm7.14.0a20261122-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert fits("not-a-wheel.tar.gz", "3.12") is None
    # The stable ABI: a wheel for CPython 3.8 and newer loads on 3.11, one for 3.12 and newer does not.
    assert str(fits("hf_xet-1.8.0-cp38-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "3.11")) == "1.8.0"
    assert fits("x-1.0-cp312-abi3-manylinux_2_28_x86_64.whl", "3.11") is None
    assert requires_rocm("Name: torch\nRequires-Dist: filelock\nRequires-Dist: rocm[libraries]==7.14.0a20261122\n") == "7.14.0a20261122"
    assert requires_rocm("Name: mini-torch\nRequires-Dist: mini_aotriton==1.0.0\n") == ""


def test_a_wheel_that_fails_its_own_record_is_refused_naming_target_pin_and_member(tmp_path) -> None:
    # Each kind of hostile wheel: scripts/simple_index_test.py. Here: what the rule says, with a real
    # index on 127.0.0.1, and the same wheel with a matching RECORD line is used.
    served = tmp_path / "serve"
    (served / "simple/mini-torch").mkdir(parents=True)
    (served / "simple/mini-torch/index.html").write_text(f'<a href="../../{FILE}">{FILE}</a>\n')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    index_url = f"http://127.0.0.1:{httpd.server_address[1]}/simple/"
    rule_runner = isolated_rule_runner(
        rules=[*wheel_rules.rules(), QueryRule(FetchedPrebuilt, [PrebuiltRequest]), QueryRule(DigestContents, [Digest])],
        target_types=[PrebuiltWheelTarget],
    )

    def fetch(code: bytes) -> FetchedPrebuilt:
        with zipfile.ZipFile(served / FILE, "w") as zf:
            zf.writestr("mini_torch/__init__.py", code)
            zf.writestr("mini_torch-1.0.dist-info/RECORD", f"mini_torch/__init__.py,sha256={GOOD_HASH},16\n")
        sha = hashlib.sha256((served / FILE).read_bytes()).hexdigest()
        rule_runner.write_files(
            {
                "pins.toml": f'[prebuilt.mini]\nindex_url = "{index_url}"\nproject = "mini-torch"\ntrack = ">=1"\n'
                f'python = "3.11"\nversion = "1.0"\nfile = "{FILE}"\nsha256 = "{sha}"\n',
                "BUILD": "prebuilt_wheel(name='torch', pin='mini', pins_file='pins.toml')",
            }
        )
        return rule_runner.request(FetchedPrebuilt, [PrebuiltRequest(Address("", target_name="torch"), "test")])

    try:
        with pytest.raises(ExecutionError) as e:
            fetch(b"import os  # evil\n")
        assert (
            f"prebuilt_wheel //:torch: refused {FILE}: member 'mini_torch/__init__.py' has "
            f"sha256=cNz86wGz90K53awbcDtXj39UhnSLWgFAtG_kcR4lKR8, but mini_torch-1.0.dist-info/RECORD says "
            f"sha256={GOOD_HASH} (from {index_url}, pin `mini`, [prebuilt.mini] in pins.toml). Nothing was used. "
            "Report it to the index's maintainers, and move the pin to a sound file with "
            "`pants run rules:update-pins -- --only mini` once there is one."
        ) in str(e.value)
        fetched = fetch(b"VERSION = '1.0'\n")
        assert [fc.path for fc in rule_runner.request(DigestContents, [fetched.wheel])] == [FILE]
    finally:
        httpd.shutdown()
