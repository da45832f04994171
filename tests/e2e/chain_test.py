"""The miniature chain, built for real by a nested `./pants`: what is rebuilt, and what is in the wheels."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Dict

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from uv import find_uv_bin

from e2e.wheels import code_object_archs, requires_dist, version
from e2e.workspace import Workspace, make_fixture_upstreams, require_success
from mini.make_upstreams import component_files

CHAIN = [
    "tests/mini/aotriton:wheel",
    "tests/mini/torch:wheel",
    "tests/mini/flash_attention:wheel",
    "tests/mini/vllm:wheel",
]
VLLM = "tests/mini/vllm:wheel"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    root = tmp_path_factory.mktemp("chain")
    upstreams = make_fixture_upstreams(root / "upstreams")
    return root, upstreams


@pytest.fixture(scope="module")
def checkout(shared):
    workspace = new_workspace(shared, "checkout-a")
    yield workspace
    workspace.stop()


@pytest.fixture
def a(checkout):
    """The first checkout, as it was before the case (its pantsd and the builds in the store
    stay): the second case's "first checkout" is this one, where a copy of its own would start
    another pantsd (~10 s of CPU) to build or find the same wheels."""
    yield checkout
    checkout.reset()


def new_workspace(shared, name: str) -> Workspace:
    root, upstreams = shared
    # One local store and named-cache dir for every copy: "another checkout, same machine".
    return Workspace(root / name, upstreams, root / "store", root / "named_caches")


def install_and_run(wheels, code: str, tmp: Path) -> str:
    venv = tmp / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for wheel in wheels:
        zipfile.ZipFile(wheel).extractall(site)  # a wheel install without pip (no scripts here)
    return subprocess.run([str(venv / "bin/python"), "-c", code], check=True, capture_output=True, text=True).stdout


def check_built_against(wheels: Dict[str, Path], tmp_path: Path) -> None:
    """Each wheel requires the exact wheels it was built against, so pip installs the chain
    as built and refuses a torch of another version next to the vllm built on this one."""
    torch, fa, vllm = wheels["tests.mini.torch"], wheels["tests.mini.flash_attention"], wheels["tests.mini.vllm"]
    assert requires_dist(vllm) == [f"mini_flash_attention=={version(fa)}", f"mini_torch=={version(torch)}"]
    # Torch also requires the SDK it links, host and device wheel, at the versions it was built on.
    assert requires_dist(torch) == [
        f"mini_aotriton=={version(wheels['tests.mini.aotriton'])}", "mini_rocm_sdk_core==1.0.0", "mini_rocm_sdk_device_gfx1151==1.0.0"
    ]
    # The lock left pip's cmake out, and the build says so and which cmake it used.
    log = (vllm.parent / f"{vllm.name}.build.log").read_text()
    assert "== cmake: the lock left out pip's cmake==3.31.6; the system cmake is used: /usr/bin/cmake (cmake version" in log

    venv = tmp_path / "pip-venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "--no-index", "--disable-pip-version-check"]
    other = tmp_path / "other-torch"
    subprocess.run(["/usr/bin/python3", "rules/rocm_build/scripts/wheel_files.py", "label", str(torch), str(other), "other"], check=True)
    (other_torch,) = other.glob("*.whl")
    sdk = [str(p) for p in vllm.parent.parent.glob("tests.mini.sdk.*/*.whl")]
    refused = subprocess.run([*pip, "--dry-run", str(vllm), str(fa), str(other_torch), *sdk], capture_output=True, text=True)
    assert refused.returncode != 0
    assert f"mini-vllm {version(vllm)} depends on mini_torch=={version(torch)}" in refused.stdout + refused.stderr
    # The chain as `package` leaves it to install: the install set's own command (docs/checks.md), from dist/.
    install = vllm.parent.parent / "tests.mini.vllm.install"
    requirements = (install / "requirements.txt").read_text()
    for wheel in wheels.values():
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert f"{wheel.name.split('-')[0]}=={version(wheel)} --hash=sha256:{digest}\n" in requirements
    installed = subprocess.run([*pip, "--find-links", "wheels", "-r", "requirements.txt"], cwd=install, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    assert f"mini-torch-{version(torch)}" in installed.stdout.replace("_", "-")
    check_supply_chain(wheels, install, tmp_path)


def check_supply_chain(wheels: Dict[str, Path], install: Path, tmp_path: Path) -> None:
    """What standard tools read (docs/supply-chain.md): each wheel's SBOM (PEP 770) and the set's
    valid CycloneDX; each built wheel's provenance names it by its sha256; the set installs from
    its pylock.toml with uv, offline, and imports."""
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    sha = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (install / "wheels").iterdir()}
    for wheel in wheels.values():
        info_dir = wheel.name.split("-cp")[0] + ".dist-info"
        with zipfile.ZipFile(wheel) as archive:
            sbom = archive.read(f"{info_dir}/sboms/rocm-pants.cdx.json").decode()
            assert f"{info_dir}/sboms/rocm-pants.cdx.json,sha256=" in archive.read(f"{info_dir}/RECORD").decode()
        assert validator.validate_str(sbom) is None, wheel.name
        assert json.loads(sbom)["metadata"]["component"]["version"] == version(wheel)
        (line,) = (wheel.parent / f"{wheel.name}.intoto.jsonl").read_text().splitlines()
        envelope = json.loads(line)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        assert statement["subject"] == [{"name": wheel.name, "digest": {"sha256": sha[wheel.name]}}]
        assert envelope["signatures"] == []  # no [rocm-provenance] signing_key here
    set_sbom = (install / "sbom.cdx.json").read_text()
    assert validator.validate_str(set_sbom) is None
    assert sorted(c["hashes"][0]["content"] for c in json.loads(set_sbom)["components"]) == sorted(sha.values())
    assert "uv pip install --offline -r pylock.toml" in (install / "requirements.txt").read_text()

    venv = tmp_path / "uv-venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    uv = [find_uv_bin(), "pip", "install", "--offline", "--python", str(venv / "bin/python"), "-r", "pylock.toml"]
    installed = subprocess.run(uv, cwd=install, env=env, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    code = "import mini_vllm, mini_torch; print(mini_torch.answer(), mini_vllm.PATCHED_FOR)"
    ran = subprocess.run([str(venv / "bin/python"), "-c", code], capture_output=True, text=True)
    assert (ran.returncode, ran.stdout) == (0, "1151 gfx1151\n"), ran.stderr


def test_chain_builds_in_order_and_rebuilds_only_what_changed(shared, a: Workspace, tmp_path) -> None:
    ws = a
    _, upstreams = shared
    aotriton = upstreams.commits["aotriton"]
    try:
        first = require_success(ws.package(VLLM), "first build")
        assert first.built == CHAIN, first.stderr[-3000:]
        assert "Provenance (<wheel>.intoto.jsonl) unsigned: set [rocm-provenance] signing_key to sign it" in first.stderr
        wheels = ws.dist_wheels()
        assert sorted(wheels) == ["tests.mini.aotriton", "tests.mini.flash_attention", "tests.mini.torch", "tests.mini.vllm"]
        # The SDK's prebuilt wheels (tests/mini/sdk) go to dist/ with the chain, as they are.
        assert sorted(set(ws.dist_wheels(prebuilt=True)) - set(wheels)) == ["tests.mini.sdk.core", "tests.mini.sdk.gfx1151"]
        for wheel in wheels.values():
            # The version says which build it is: the digest of its inputs after the label.
            assert re.search(r"\+llvm19gfx1151\.k[0-9a-f]{16}-", wheel.name), wheel.name
            # The arch comes from the code object's ELF header, not from anything we wrote.
            assert set(code_object_archs(wheel).values()) == {"gfx1151"}, wheel
            log = (wheel.parent / f"{wheel.name}.build.log").read_text()
            assert log.startswith("== rocm_build:")
            # Where the time went, phase by phase.
            phases = ("set-up", "venv and dependencies", "build steps", "wheel", "labelling")
            assert re.search("== phase times: " + ", ".join(rf"{p} \d+\.\d s" for p in phases) + "\n", log), log[-600:]

        info = json.loads(zipfile.ZipFile(wheels["tests.mini.vllm"]).read(
            wheels["tests.mini.vllm"].name.split("-cp")[0] + ".dist-info/rocm_build_info.json"
        ))
        assert info["source"]["patches"][0]["path"] == "tests/mini/patches/vllm/0001-report-gfx1151.patch"
        assert {d["target"] for d in info["dependencies"]} == {"tests/mini/torch:wheel", "tests/mini/flash_attention:wheel"}
        assert info["toolchain"]["identity"].startswith("provider=llvm\n")
        # The gpu-code audit read every library: what it found is recorded.
        assert info["gpu_code"] == {"mini_vllm/kernels/scale-gfx1151.co": ["gfx1151"]}
        assert info["allow_missing_gpu_targets"] == []

        # The C extensions work, the torch edit and vllm patch are in, and each downstream
        # was built against its upstream's installed wheel.
        out = install_and_run(
            ws.dist_wheels(prebuilt=True).values(),  # the SDK too: mini torch's library links it
            "import mini_vllm, mini_torch, mini_vllm._built_with as b;"
            "print(mini_torch.answer(), mini_vllm.PATCHED_FOR, sorted(b.UPSTREAMS))",
            tmp_path,
        )
        assert out.split() == ["1151", "gfx1151", "['mini_flash_attention',", "'mini_torch']"]

        check_built_against(wheels, tmp_path)

        again = require_success(ws.package(VLLM), "second build")
        assert again.built == []

        patch = "tests/mini/patches/vllm/0001-report-gfx1151.patch"
        ws.write(patch, ws.read(patch).replace('"gfx1151"', '"gfx1151 (strix halo)"'))
        # Before spending the build: what would rebuild, and why.
        plan = require_success(ws.pants("rocm-plan", VLLM), "the plan after a patch edit")
        rebuild = [line for line in plan.stdout.splitlines() if line.startswith("  rebuild   ")]
        assert [line.split(":")[0] for line in rebuild] == ["  rebuild   no"] * 3 + ["  rebuild   yes"]
        assert rebuild[0] == "  rebuild   no: same inputs as the wheel in dist/tests.mini.aotriton/ (the toolchain's identity is compared at build time)"
        assert rebuild[3].startswith(f"  rebuild   yes: patch {patch} changed (")
        after_patch = require_success(ws.package(VLLM), "build after a vllm patch edit")
        assert after_patch.built == [VLLM]

        files = component_files("aotriton", version="1.0.1")
        upstreams.new_commit("aotriton", {"setup.py": files["setup.py"]}, "mini aotriton 1.0.1")
        ws.write_pins(upstreams)
        after_pin = require_success(ws.package(VLLM), "build after moving the aotriton pin")
        # aotriton's new version reaches torch's build, but not the bytes of torch's wheel:
        # its dependents are cache hits (early cutoff).
        assert after_pin.built == CHAIN[:2]
        assert "mini_aotriton-1.0.1+llvm19gfx1151" in ws.dist_wheels()["tests.mini.aotriton"].name
    finally:
        # The copy pins what it pinned before the case (write_pins is not a `write` reset undoes).
        upstreams.commits["aotriton"] = aotriton
        ws.write_pins()


def test_other_checkout_hits_the_cache_and_second_gpu_target(shared, a: Workspace) -> None:
    b = new_workspace(shared, "checkout-b")  # another path, same local store
    try:
        require_success(a.package(VLLM), "build in the first checkout")
        other = require_success(b.package(VLLM), "build in the second checkout")
        assert other.built == []
        assert {k: p.read_bytes() for k, p in a.dist_wheels().items()} == {
            k: p.read_bytes() for k, p in b.dist_wheels().items()
        }

        build = "tests/mini/aotriton/BUILD"
        b.write(build, b.read(build).replace('gpu_targets=["gfx1151"]', 'gpu_targets=["gfx1151", "gfx1100"]'))
        two = require_success(b.package("tests/mini/aotriton:wheel"), "build for two gpu targets")
        assert two.built == ["tests/mini/aotriton:wheel"]
        (wheel,) = b.path("dist/tests.mini.aotriton").glob("*+llvm19gfx1100.gfx1151.k*-*.whl")
        assert sorted(code_object_archs(wheel).values()) == ["gfx1100", "gfx1151"]
    finally:
        b.stop()
