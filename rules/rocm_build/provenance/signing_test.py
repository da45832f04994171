"""A built wheel's folder for dist/ with its provenance, through the rules: the statement's
subject is the wheel's own sha256; unsigned without a key; with one, a signature openssl
verifies over DSSE's encoding, by the key's id; none for someone else's wheel."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, DigestContents, FileContent
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.provenance import signing
from rocm_build.provenance.signing import WheelWithProvenance
from rocm_build.provenance.statement import BUILD_TYPE, PAYLOAD_TYPE, pae
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner

WHEEL = "mini_vllm-1.0.0+llvm19gfx1151.k2217db16-cp311-cp311-linux_x86_64.whl"
SOURCE = {"pin": "mini-vllm", "url": "file:///tmp/rocm-pants-mini/vllm", "commit": "e8" * 20, "patches": [{"path": "tests/mini/patches/vllm/0001.patch", "sha256": "c2" * 32}]}
INFO = {
    "target": "tests/mini/vllm:wheel",
    "gpu_targets": ["gfx1151"],
    "env": {"GPU_ARCHS": "gfx1151"},
    "recipe": {"steps": ["true"], "wheel_command": "pip wheel ."},
    "source": SOURCE,
    "toolchain": {"address": "tests/mini:llvm", "identity": "provider=llvm\nversion=\nclang 19"},
    "python": "CPython 3.11.7",
    "environment": {"name": "mini-box", "image_id": "sha256:" + "ab" * 32},
    "network": "none (own network namespace)",
    "build_requirements": {
        "lock": "3rdparty/build/py3.11/mini-vllm.lock", "sha256": "b5" * 32, "distributions": ["six==1.16.0"],
        "wheels": [{"name": "six", "version": "1.16.0", "file": "six-1.16.0-py2.py3-none-any.whl", "sha256": "8a" * 32}],
    },
    "archives": {},
    "dependencies": [
        {"target": "tests/mini/torch:wheel", "wheel": "mini_torch-1.0.0+llvm19gfx1151.k0650f4b6-cp311-cp311-linux_x86_64.whl", "payload_sha256": "98" * 32, "source": SOURCE},
        {"target": "tests/mini/sdk:core", "wheel": "mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl", "payload_sha256": "75" * 32,
         "source": {"prebuilt": "mini-sdk-core", "index_url": "http://127.0.0.1:1/simple/", "file": "mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl", "sha256": "75" * 32}},
    ],
    "payload_sha256": "ca" * 32,
    "version_key": {"label": "k2217db16", "digest": "2217db16"},
}  # fmt: skip


@pytest.fixture
def rule_runner() -> RuleRunner:
    return isolated_rule_runner(rules=[*signing.rules(), QueryRule(Digest, [WheelWithProvenance]), QueryRule(DigestContents, [Digest])])


def a_wheel() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mini_vllm/__init__.py", "PATCHED_FOR = 'gfx1151'\n")
    return out.getvalue()


def folder(rule_runner: RuleRunner, info: dict, name: str = WHEEL) -> dict:
    data = a_wheel()
    wheel, log = (rule_runner.request(Digest, [CreateDigest([FileContent(n, d)])]) for n, d in ((name, data), (f"{name}.build.log", b"log\n")))
    built = BuiltRocmWheel(Address("tests/mini/vllm", target_name="wheel"), name, hashlib.sha256(data).hexdigest(), wheel, log, json.dumps(info))
    digest = rule_runner.request(Digest, [WheelWithProvenance(built)])
    return {f.path: f.content for f in rule_runner.request(DigestContents, [digest])}


def decoded(line: bytes) -> tuple:
    envelope = json.loads(line)
    assert envelope["payloadType"] == PAYLOAD_TYPE
    body = base64.b64decode(envelope["payload"])
    return envelope, body, json.loads(body)


def test_the_statement_beside_a_built_wheel_names_it_by_its_sha256(rule_runner: RuleRunner) -> None:
    files = folder(rule_runner, INFO)
    assert sorted(files) == [WHEEL, f"{WHEEL}.build.log", f"{WHEEL}.intoto.jsonl"]
    (line,) = files[f"{WHEEL}.intoto.jsonl"].splitlines()
    envelope, _, statement = decoded(line)
    assert envelope["signatures"] == []  # no key configured: unsigned, and it says so
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": WHEEL, "digest": {"sha256": hashlib.sha256(files[WHEEL]).hexdigest()}}]
    definition = statement["predicate"]["buildDefinition"]
    assert definition["buildType"] == BUILD_TYPE
    assert definition["externalParameters"]["target"] == "tests/mini/vllm:wheel"
    assert definition["externalParameters"]["env"] == {"GPU_ARCHS": "gfx1151"}
    deps = {d["name"]: d for d in definition["resolvedDependencies"]}
    assert deps["mini-vllm"] == {"name": "mini-vllm", "uri": f"git+file:///tmp/rocm-pants-mini/vllm@{'e8' * 20}", "digest": {"gitCommit": "e8" * 20}}
    assert deps["tests/mini/patches/vllm/0001.patch"]["digest"] == {"sha256": "c2" * 32}
    assert deps["3rdparty/build/py3.11/mini-vllm.lock"]["digest"] == {"sha256": "b5" * 32}
    assert (deps["six-1.16.0-py2.py3-none-any.whl"]["uri"], deps["six-1.16.0-py2.py3-none-any.whl"]["digest"]) == ("pkg:pypi/six@1.16.0", {"sha256": "8a" * 32})
    core = deps["mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl"]
    assert core["annotations"] == {"role": "dependency wheel", "origin": "prebuilt", "pin": "mini-sdk-core", "index_url": "http://127.0.0.1:1/simple/"}
    torch = deps["mini_torch-1.0.0+llvm19gfx1151.k0650f4b6-cp311-cp311-linux_x86_64.whl"]
    assert (torch["digest"], torch["annotations"]["target"]) == ({"sha256": "98" * 32}, "tests/mini/torch:wheel")
    assert deps["mini-box"]["digest"] == {"sha256": "ab" * 32}
    assert base64.b64decode(deps["tests/mini:llvm"]["content"]).decode() == "provider=llvm\nversion=\nclang 19"
    # The same wheel, the same bytes: no time, no run id.
    assert folder(rule_runner, INFO)[f"{WHEEL}.intoto.jsonl"] == files[f"{WHEEL}.intoto.jsonl"]


def test_with_a_key_the_envelope_is_signed_and_openssl_verifies_it(rule_runner: RuleRunner, tmp_path: Path) -> None:
    key = tmp_path / "signing.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    public = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout"], check=True, capture_output=True).stdout
    public_der = subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-outform", "DER"], check=True, capture_output=True).stdout
    (tmp_path / "public.pem").write_bytes(public)
    rule_runner.set_options([f"--rocm-provenance-signing-key={key}"])
    envelope, body, statement = decoded(folder(rule_runner, INFO)[f"{WHEEL}.intoto.jsonl"])
    (signature,) = envelope["signatures"]
    assert signature["keyid"] == hashlib.sha256(public_der).hexdigest()
    (tmp_path / "pae").write_bytes(pae(PAYLOAD_TYPE, body))
    (tmp_path / "sig").write_bytes(base64.b64decode(signature["sig"]))
    verify = ["openssl", "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", str(tmp_path / "public.pem"), "-in", str(tmp_path / "pae"), "-sigfile", str(tmp_path / "sig")]
    assert subprocess.run(verify, capture_output=True, text=True).stdout.strip() == "Signature Verified Successfully"
    # Another statement under that signature is refused.
    (tmp_path / "pae").write_bytes(pae(PAYLOAD_TYPE, body.replace(b"gfx1151", b"gfx1100")))
    assert subprocess.run(verify, capture_output=True, text=True).returncode != 0
    assert statement["subject"][0]["name"] == WHEEL


def test_a_key_openssl_cannot_sign_with_is_named_with_the_fix(rule_runner: RuleRunner, tmp_path: Path) -> None:
    (tmp_path / "not-a-key.pem").write_text("hello\n")
    rule_runner.set_options([f"--rocm-provenance-signing-key={tmp_path / 'not-a-key.pem'}"])
    with pytest.raises(ExecutionError) as error:
        folder(rule_runner, INFO)
    assert f"`[rocm-provenance] signing_key`: openssl could not sign with {tmp_path / 'not-a-key.pem'}:" in str(error.value)
    assert "openssl genpkey -algorithm ed25519 -out KEY" in str(error.value)


def test_someone_elses_wheel_gets_no_provenance_from_us(rule_runner: RuleRunner) -> None:
    name = "mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl"
    info = {"target": "tests/mini/sdk:core", "source": {"prebuilt": "mini-sdk-core", "index_url": "http://127.0.0.1:1/simple/", "file": name, "sha256": "75" * 32}}
    assert sorted(folder(rule_runner, info, name)) == [name, f"{name}.build.log"]
