"""Our SBOMs and pylock.toml as the standard tools read them (in python-default, the resolve that
holds them): each SBOM valid against the CycloneDX 1.6 schema (cyclonedx-python-lib), the one in
a wheel written by `wheel_files.py add-info` on a real wheel; a set installed from its
pylock.toml by uv, offline, into a fresh venv, and imported."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Sequence

import pytest
from cyclonedx.model.bom import Bom
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from uv import find_uv_bin

from rocm_build.scripts import pylock, sbom
from rocm_build.testutil.script_runs import run_script

SOURCE = {
    "pin": "mini-vllm",
    "url": "file:///tmp/rocm-pants-mini/vllm",
    "commit": "e8" * 20,
    "patches": [{"path": "tests/mini/patches/vllm/0001-report-gfx1151.patch", "sha256": "c2" * 32}],
}
INFO = {
    "target": "tests/mini/vllm:wheel",
    "gpu_targets": ["gfx1151"],
    "label": "llvm19gfx1151",
    "source": SOURCE,
    "toolchain": {"address": "tests/mini:llvm", "identity": "provider=llvm\nversion=\nDebian clang version 19.1.7"},
    "python": "CPython 3.11.7",
    "environment": {"name": "mini-box", "image_id": "sha256:" + "ab" * 32, "repo_digests": []},
    "network": "none (own network namespace)",
    "build_requirements": {
        "lock": "3rdparty/build/py3.11/mini-vllm.lock",
        "sha256": "b5" * 32,
        "distributions": ["six==1.16.0"],
        "wheels": [{"name": "six", "version": "1.16.0", "file": "six-1.16.0-py2.py3-none-any.whl", "sha256": "8a" * 32}],
    },
    "archives": {"EXTRA": {"target": "components:extra", "url": "https://example.org/extra.tar.gz", "sha256": "ef" * 32}},
    "source_date_epoch": 1767225600,
    "dependencies": [
        {"target": "tests/mini/torch:wheel", "wheel": "mini_torch-1.0.0+llvm19gfx1151.k0650f4b6-cp311-cp311-linux_x86_64.whl", "payload_sha256": "98" * 32, "source": SOURCE},
        {
            "target": "tests/mini/sdk:core",
            "wheel": "mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl",
            "payload_sha256": "75" * 32,
            "source": {"prebuilt": "mini-sdk-core", "index_url": "http://127.0.0.1:8000/simple/", "file": "mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl", "sha256": "75" * 32},
        },
    ],
    "payload_sha256": "ca" * 32,
    "version_key": {"label": "k2217db16", "digest": "2217db16"},
}


def valid(document: bytes) -> dict:
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(document.decode())
    assert error is None, error
    Bom.from_json(json.loads(document))  # and the library reads it back
    return json.loads(document)


def write_wheel(path: Path, name: str, version: str, files: Dict[str, bytes], requires: Sequence[str] = ()) -> str:
    """A wheel as bdist_wheel writes one (RECORD of every member); returns its sha256."""
    info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    lines = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}" for n, d in members.items()]
    members[f"{info}/RECORD"] = "\n".join([*lines, f"{info}/RECORD,,", ""]).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_sbom_add_info_writes_into_a_wheel_is_valid_cyclonedx(tmp_path: Path) -> None:
    src = tmp_path / "mini_vllm-1.0.0+llvm19gfx1151-py3-none-any.whl"
    write_wheel(src, "mini_vllm", "1.0.0+llvm19gfx1151", {"mini_vllm/__init__.py": b"PATCHED_FOR = 'gfx1151'\n"})
    (tmp_path / "info.json").write_text(json.dumps(INFO))
    run_script(tmp_path, ("wheel_files.py", "wheel_zip.py", "sbom.py"), "add-info", str(src), str(tmp_path / "out"), str(tmp_path / "info.json"))
    (wheel,) = (tmp_path / "out").glob("*.whl")
    info_dir = "mini_vllm-1.0.0+llvm19gfx1151.k2217db16.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        record = archive.read(f"{info_dir}/RECORD").decode()
        document = archive.read(f"{info_dir}/sboms/rocm-pants.cdx.json")
    assert f"{info_dir}/sboms/rocm-pants.cdx.json,sha256=" in record  # PEP 770: listed in RECORD
    doc = valid(document)
    assert (doc["metadata"]["component"]["name"], doc["metadata"]["component"]["version"]) == ("mini_vllm", "1.0.0+llvm19gfx1151.k2217db16")


@pytest.mark.parametrize("variant", ["archive upstream, no lock, no image", "no dependencies, no patches"])
def test_every_kind_of_build_info_gives_a_valid_sbom(variant: str) -> None:
    info = copy.deepcopy(INFO)
    if variant.startswith("archive"):
        info["source"] = {"pin": "mini-aotriton", "url": "https://example.org/aotriton-1.0.tar.gz", "sha256": "12" * 32, "patches": []}
        info["build_requirements"], info["environment"] = None, {"name": "__local__"}
    else:
        info["dependencies"], info["source"]["patches"], info["archives"] = [], [], {}
    valid(sbom.wheel_sbom(info, "mini_aotriton", "1.0.0+llvm19gfx1151.k00000000"))


SET = [
    {"file": "pkg_top-1.0+llvm19gfx1151.k1234abcd-py3-none-any.whl", "origin": "built", "target": "tests/mini/top:wheel"},
    {"file": "pkg_base-2.0-py3-none-any.whl", "origin": "prebuilt", "pin": "mini-base", "index_url": "http://127.0.0.1:1/simple/"},
    {"file": "pkg_dep-0.5-py3-none-any.whl", "origin": "locked", "lock": "the chain's run-time lock"},
]


def test_a_set_installs_from_its_pylock_with_uv_offline_and_its_sbom_is_valid(tmp_path: Path) -> None:
    root = tmp_path / "set"
    sources = {
        "pkg_top": ({"pkg_top/__init__.py": b"import pkg_base, pkg_dep\nANSWER = pkg_base.X + pkg_dep.Y\n"}, ["pkg_base==2.0", "pkg_dep==0.5"]),
        "pkg_base": ({"pkg_base/__init__.py": b"X = 1000\n"}, []),
        "pkg_dep": ({"pkg_dep/__init__.py": b"Y = 151\n"}, []),
    }
    wheels = []
    for w in SET:
        name, version = w["file"].split("-")[:2]
        files, requires = sources[name]
        wheels.append({**w, "sha256": write_wheel(root / "wheels" / w["file"], name, version, files, requires)})
    (root / "pylock.toml").write_text(pylock.pylock(wheels, ["# then install: uv pip install --offline -r pylock.toml"]))
    doc = valid(sbom.install_set_sbom("tests/mini/top:wheel", wheels, {"gpu_targets": ["gfx1151"], "sdk": None, "sdk_modules": []}))
    assert sorted(c["hashes"][0]["content"] for c in doc["components"]) == sorted(w["sha256"] for w in wheels)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # No index is reachable (the prebuilt one's is a closed port): every wheel comes from wheels/.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    uv = [find_uv_bin(), "pip", "install", "--offline", "--python", str(venv / "bin/python"), "-r", "pylock.toml"]
    installed = subprocess.run(uv, cwd=root, env=env, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    assert "+ pkg-top==1.0+llvm19gfx1151.k1234abcd" in installed.stderr, installed.stderr
    ran = subprocess.run([str(venv / "bin/python"), "-c", "import pkg_top; print(pkg_top.ANSWER)"], capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (0, "1151\n"), ran.stderr

    # A wheel that is not the one pylock.toml pins is refused.
    write_wheel(root / "wheels" / SET[2]["file"], "pkg_dep", "0.5", {"pkg_dep/__init__.py": b"Y = 0\n"})
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv2")], check=True)
    uv[uv.index(str(venv / "bin/python"))] = str(tmp_path / "venv2/bin/python")
    refused = subprocess.run(uv, cwd=root, env=env, capture_output=True, text=True)
    assert refused.returncode != 0 and "Hash mismatch" in refused.stderr, refused.stderr
