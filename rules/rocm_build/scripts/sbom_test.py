"""sbom.py and pylock.py on a build info as a build writes it: what each SBOM says, exactly, and
that the same content gives the same bytes. (The CycloneDX schema and uv's install of a
pylock.toml are proven in standards_test.py, in the resolve that holds those tools.)"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid

from rocm_build.scripts import pylock, sbom

COMMIT = "e8b61258139e99360b1e3c9bd955b953d0bb0087"
PATCH_SHA = "c2c5eeafc33628140a81e8f03d4c2e5dc81b1921cbbd031666c9640e97251738"
PAYLOAD = "ca8194c3a8cbba744bff271db14d4d7d9072862d6324c7db3c9cf6f51535bbc1"
TORCH_PAYLOAD = "98674c3f6189a993fed3ae64c7f117ec53d0b578fa31ff8c4b2b559e7f6089a8"
SDK_SHA = "75e3273b3a8c31bf7e24f9ea2c76f2ad3afd96f2f3642dee9b142458d1ba5e69"
SIX_SHA = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
IMAGE = "sha256:" + "ab" * 32
INFO = {
    "target": "components/vllm:wheel",
    "gpu_targets": ["gfx1151"],
    "label": "rocm7.14gfx1151",
    "source": {
        "pin": "vllm",
        "url": "https://github.com/vllm-project/vllm.git",
        "commit": COMMIT,
        "patches": [{"path": "patches/vllm/0001-gfx1151.patch", "sha256": PATCH_SHA}],
    },
    "toolchain": {"address": "components:therock", "identity": "provider=therock\nversion=7.14.0\nAMD clang version 20.0.0"},
    "python": "CPython 3.12.1",
    "environment": {"name": "rocm-build-box", "image_id": IMAGE, "repo_digests": ["registry.example/rocm-build@sha256:" + "cd" * 32]},
    "network": "none (own network namespace)",
    "build_requirements": {
        "lock": "3rdparty/build/py3.12/vllm.lock",
        "sha256": "b54e729b5a9a48ada64ebe97b1f05c6981d9b0b492025878c35e3240fe3dc418",
        "distributions": ["six==1.16.0"],
        "wheels": [{"name": "six", "version": "1.16.0", "file": "six-1.16.0-py2.py3-none-any.whl", "sha256": SIX_SHA}],
    },
    "archives": {"CUTLASS_SRC": {"target": "components:cutlass", "url": "https://example.org/cutlass-3.5.tar.gz", "sha256": "ef" * 32}},
    "source_date_epoch": 1767225600,
    "dependencies": [
        {
            "target": "components/torch:wheel",
            "wheel": "torch-2.9.0+rocm7.14gfx1151.k0650f4b6-cp312-cp312-linux_x86_64.whl",
            "payload_sha256": TORCH_PAYLOAD,
            "source": {"pin": "torch", "url": "https://github.com/pytorch/pytorch", "commit": "0d" * 20, "patches": []},
        },
        {
            "target": "components/sdk:core",
            "wheel": "rocm_sdk_core-7.14.0-py3-none-linux_x86_64.whl",
            "payload_sha256": SDK_SHA,
            "source": {"prebuilt": "therock-core", "index_url": "https://rocm.example/v2/gfx1151/", "file": "rocm_sdk_core-7.14.0-py3-none-linux_x86_64.whl", "sha256": SDK_SHA},
        },
    ],
    "gpu_code": {"vllm/_C.so": ["gfx1151"]},
    "platform": {"by": "auditwheel show", "tag": "linux_x86_64"},
    "payload_sha256": PAYLOAD,
    "version_key": {"label": "k2217db16", "digest": "2217db16"},
}
VERSION = "0.11.0+rocm7.14gfx1151.k2217db16"


def by_ref(doc: dict) -> dict:
    return {c["bom-ref"]: c for c in doc["components"]}


def prop(component: dict, name: str) -> str:
    (value,) = [p["value"] for p in component.get("properties", ()) if p["name"] == f"rocm-pants:{name}"]
    return value


def test_a_wheels_sbom_names_every_input_of_its_build() -> None:
    data = sbom.wheel_sbom(INFO, "vllm", VERSION)
    doc = json.loads(data)
    assert (doc["bomFormat"], doc["specVersion"], doc["version"]) == ("CycloneDX", "1.6", 1)
    assert (doc["metadata"]["component"]["name"], doc["metadata"]["component"]["version"]) == ("vllm", VERSION)
    wheel = doc["metadata"]["component"]
    assert (prop(wheel, "gpu-targets"), prop(wheel, "python"), prop(wheel, "build-environment")) == ("gfx1151", "CPython 3.12.1", IMAGE)
    assert (prop(wheel, "version-key"), prop(wheel, "payload-sha256")) == ("2217db16", PAYLOAD)
    c = by_ref(doc)
    assert c["upstream"]["purl"] == f"pkg:github/vllm-project/vllm@{COMMIT}"
    assert c["upstream"]["externalReferences"] == [{"type": "vcs", "url": "https://github.com/vllm-project/vllm.git", "comment": f"git commit {COMMIT}"}]
    assert c["upstream"]["pedigree"] == {"patches": [{"type": "unofficial", "diff": {"url": "patches/vllm/0001-gfx1151.patch"}}]}
    patch = c["patch:patches/vllm/0001-gfx1151.patch"]
    assert (patch["type"], patch["hashes"]) == ("file", [{"alg": "SHA-256", "content": PATCH_SHA}])
    six = c["build-requirement:six"]
    assert (six["version"], six["purl"], six["hashes"], six["scope"]) == ("1.16.0", "pkg:pypi/six@1.16.0", [{"alg": "SHA-256", "content": SIX_SHA}], "excluded")
    assert c["build-lock"]["name"] == "3rdparty/build/py3.12/vllm.lock"
    assert c["archive:CUTLASS_SRC"]["hashes"] == [{"alg": "SHA-256", "content": "ef" * 32}]
    assert (c["toolchain"]["version"], c["toolchain"]["description"]) == ("7.14.0", INFO["toolchain"]["identity"])
    assert (c["python"]["name"], c["python"]["version"]) == ("CPython", "3.12.1")
    assert (c["image"]["version"], c["image"]["hashes"]) == (IMAGE, [{"alg": "SHA-256", "content": "ab" * 32}])
    # Ours by the payload it was built against; someone else's by its pin, sha256 and index.
    torch = c["dependency:torch"]
    assert (torch["version"], torch["hashes"][0]["content"]) == ("2.9.0+rocm7.14gfx1151.k0650f4b6", TORCH_PAYLOAD)
    assert prop(torch, "origin").startswith("built here: the hash is of the wheel its build wrote")
    core = c["dependency:rocm-sdk-core"]
    assert core["purl"] == "pkg:pypi/rocm-sdk-core@7.14.0?repository_url=https://rocm.example/v2/gfx1151/"
    assert prop(core, "origin") == "prebuilt: someone else's wheel, pinned by sha256"
    assert "purl" not in torch  # not on any index: no package URL claims it is
    assert doc["dependencies"][0] == {"ref": "wheel", "dependsOn": ["dependency:torch", "dependency:rocm-sdk-core"]}
    # What the version key does not cover is not in it: no time, no engine's idea of the image.
    assert b"registry.example" not in data and b"timestamp" not in data and b"linux_x86_64\"" not in data


def test_the_same_build_info_gives_the_same_bytes_and_another_another_serial() -> None:
    first, again = sbom.wheel_sbom(INFO, "vllm", VERSION), sbom.wheel_sbom(copy.deepcopy(INFO), "vllm", VERSION)
    assert first == again
    doc = json.loads(first)
    body = {k: v for k, v in doc.items() if k != "serialNumber"}
    digest = hashlib.sha256(sbom.dumps(body)).hexdigest()
    assert doc["serialNumber"] == f"urn:uuid:{uuid.uuid5(sbom.SERIAL_NAMESPACE, digest)}"
    patched = copy.deepcopy(INFO)
    patched["source"]["patches"][0]["sha256"] = "00" * 32
    assert json.loads(sbom.wheel_sbom(patched, "vllm", VERSION))["serialNumber"] != doc["serialNumber"]


def test_an_archive_upstream_is_named_by_url_and_sha256() -> None:
    info = copy.deepcopy(INFO)
    info["source"] = {"pin": "aotriton", "url": "https://example.org/aotriton-0.9.tar.gz", "sha256": "12" * 32, "patches": []}
    info["environment"] = {"name": "__local__"}
    info["build_requirements"] = None
    doc = json.loads(sbom.wheel_sbom(info, "aotriton", "0.9+llvm19gfx1151.k00000000"))
    upstream = by_ref(doc)["upstream"]
    assert upstream["purl"] == "pkg:generic/aotriton?checksum=sha256:" + "12" * 32 + "&download_url=https://example.org/aotriton-0.9.tar.gz"
    assert upstream["hashes"] == [{"alg": "SHA-256", "content": "12" * 32}] and "pedigree" not in upstream
    assert "image" not in by_ref(doc) and "build-lock" not in by_ref(doc)
    assert prop(doc["metadata"]["component"], "build-environment") == "__local__ (this machine, no image)"


def test_a_git_upstream_off_github_has_a_generic_purl_with_its_vcs_url() -> None:
    assert sbom.git_purl("mini-vllm", "file:///tmp/rocm-pants-mini/vllm", COMMIT) == (
        f"pkg:generic/mini-vllm@{COMMIT}?vcs_url=git%2Bfile:///tmp/rocm-pants-mini/vllm%40{COMMIT}"
    )


SET_WHEELS = [
    {"file": "vllm-0.11.0+rocm7.14gfx1151.k2217db16-cp312-cp312-linux_x86_64.whl", "sha256": "11" * 32, "origin": "built", "target": "components/vllm:wheel"},
    {"file": "torch-2.9.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl", "sha256": "22" * 32, "origin": "prebuilt", "pin": "therock-torch", "index_url": "https://rocm.example/v2/gfx1151/"},
    {"file": "einops-0.8.1-py3-none-any.whl", "sha256": "33" * 32, "origin": "locked", "lock": "the chain's run-time lock"},
]


def test_an_install_sets_sbom_lists_each_wheel_by_what_it_is_and_what_the_box_provides() -> None:
    box = {"gpu_targets": ["gfx1151"], "sdk": {"index": "https://rocm.example/v2/gfx1151/", "version": "7.14.0", "requirement": "pip install ..."}, "sdk_modules": [("amdsmi", "components/vllm:wheel")]}
    doc = json.loads(sbom.install_set_sbom("components/vllm:wheel", SET_WHEELS, box))
    c = by_ref(doc)
    torch = c["wheel:torch-2.9.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl"]
    assert prop(torch, "origin") == "prebuilt: someone else's wheel, pinned by sha256 from its index"
    assert torch["purl"] == "pkg:pypi/torch@2.9.0%2Brocm7.14.0?repository_url=https://rocm.example/v2/gfx1151/"
    vllm = c["wheel:vllm-0.11.0+rocm7.14gfx1151.k2217db16-cp312-cp312-linux_x86_64.whl"]
    assert prop(vllm, "origin").startswith("built here") and prop(vllm, "target") == "components/vllm:wheel"
    assert prop(vllm, "file") == "wheels/vllm-0.11.0+rocm7.14gfx1151.k2217db16-cp312-cp312-linux_x86_64.whl"
    assert c["wheel:einops-0.8.1-py3-none-any.whl"]["purl"] == "pkg:pypi/einops@0.8.1"
    assert {w["sha256"] for w in SET_WHEELS} == {c[f"wheel:{w['file']}"]["hashes"][0]["content"] for w in SET_WHEELS}
    assert (c["rocm-sdk"]["version"], c["rocm-sdk"]["externalReferences"][0]["url"]) == ("7.14.0", "https://rocm.example/v2/gfx1151/")
    assert prop(c["sdk-module:amdsmi"], "required-by") == "components/vllm:wheel"
    assert len(doc["dependencies"][0]["dependsOn"]) == 5


def test_pylock_lists_each_wheel_by_relative_path_and_sha256() -> None:
    text = pylock.pylock(SET_WHEELS, ["# a header line"])
    assert text == (
        "# a header line\n"
        'lock-version = "1.0"\n'
        'created-by = "rocm-pants"\n'
        "\n[[packages]]\n"
        'name = "einops"\nversion = "0.8.1"\n'
        f'wheels = [{{name = "einops-0.8.1-py3-none-any.whl", path = "wheels/einops-0.8.1-py3-none-any.whl", hashes = {{sha256 = "{"33" * 32}"}}}}]\n'
        "\n[[packages]]\n"
        'name = "torch"\nversion = "2.9.0+rocm7.14.0"\nindex = "https://rocm.example/v2/gfx1151/"\n'
        f'wheels = [{{name = "torch-2.9.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl", path = "wheels/torch-2.9.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl", hashes = {{sha256 = "{"22" * 32}"}}}}]\n'
        "\n[[packages]]\n"
        'name = "vllm"\nversion = "0.11.0+rocm7.14gfx1151.k2217db16"\n'
        f'wheels = [{{name = "vllm-0.11.0+rocm7.14gfx1151.k2217db16-cp312-cp312-linux_x86_64.whl", path = "wheels/vllm-0.11.0+rocm7.14gfx1151.k2217db16-cp312-cp312-linux_x86_64.whl", hashes = {{sha256 = "{"11" * 32}"}}}}]\n'
    )
