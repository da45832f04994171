"""The install set's sbom.cdx.json and pylock.toml from its chain and run-time set: each wheel of
wheels/ by what it is, the SDK the box must provide, and pylock.toml's header in the order of
requirements.txt's steps."""

from __future__ import annotations

import json

from pants.engine.addresses import Address
from pants.engine.fs import EMPTY_DIGEST

from rocm_build.install.runtime_set import RuntimeSet
from rocm_build.install.supply_chain import supply_chain_files
from rocm_build.locks.lockfile import LockedDist
from rocm_build.prepare.inputs import BuiltRocmWheel

TORCH = "torch-2.9.0+rocm7.14.0-cp312-cp312-linux_x86_64.whl"
VLLM = "vllm-0.11.0+rocm7.14gfx1151.k2217db16-cp312-cp312-linux_x86_64.whl"
INDEX = "https://rocm.example/v2/gfx1151/"


def wheel(spec: str, name: str, sha: str, source: dict) -> BuiltRocmWheel:
    path, target = spec.split(":")
    return BuiltRocmWheel(Address(path, target_name=target), name, sha, EMPTY_DIGEST, EMPTY_DIGEST, json.dumps({"source": source}))


def test_the_sets_sbom_and_pylock_name_every_wheel_and_what_the_box_provides() -> None:
    closure = (
        wheel("components/torch:therock", TORCH, "22" * 32, {"prebuilt": "therock-torch", "index_url": INDEX, "file": TORCH, "sha256": "22" * 32}),
        wheel("components/vllm:wheel", VLLM, "11" * 32, {"pin": "vllm", "url": "https://github.com/vllm-project/vllm", "commit": "ab" * 20, "patches": []}),
    )
    sdk_install = f"pip install --index-url {INDEX} 'rocm[libraries,device-gfx1151]==7.14.0'"
    runtime = RuntimeSet(
        env=(("FLASH_ATTENTION_TRITON_AMD_ENABLE", "TRUE", "components/flash_attention:wheel"),),
        dists=(LockedDist("einops", "0.8.1", "33" * 32, "einops-0.8.1-py3-none-any.whl"),),
        sdk=(("amdsmi", "components/vllm:wheel", sdk_install),),
        wheels=EMPTY_DIGEST,
        sdk_install=sdk_install,
        sdk_release=(INDEX, "7.14.0"),
    )
    prebuilt_step = f"# then, the prebuilt torch and what it requires, from its index: pip install --index-url {INDEX} 'torch==2.9.0+rocm7.14.0'"
    sbom_file, pylock_file = supply_chain_files(closure, runtime, ("gfx1151",), [prebuilt_step])
    assert (sbom_file.path, pylock_file.path) == ("sbom.cdx.json", "pylock.toml")

    components = {c["bom-ref"]: c for c in json.loads(sbom_file.content)["components"]}
    origins = {ref: next(p["value"] for p in c["properties"] if p["name"] == "rocm-pants:origin") for ref, c in components.items() if ref.startswith("wheel:")}
    assert origins == {
        f"wheel:{TORCH}": "prebuilt: someone else's wheel, pinned by sha256 from its index",
        f"wheel:{VLLM}": "built here: its own SBOM is in its .dist-info/sboms/, its provenance beside it in dist/",
        "wheel:einops-0.8.1-py3-none-any.whl": "run-time requirement: from the chain's run-time lock, by sha256",
    }
    sdk = components["rocm-sdk"]
    assert (sdk["version"], sdk["purl"]) == ("7.14.0", "pkg:pypi/rocm@7.14.0?repository_url=https://rocm.example/v2/gfx1151/")
    assert [p["value"] for p in sdk["properties"] if p["name"] == "rocm-pants:requirement"] == [sdk_install]
    assert "sdk-module:amdsmi" in components

    text = pylock_file.content.decode()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header[0] == "# The rocm_wheel chain of one `pants package` (components/vllm:wheel): every wheel of wheels/ by path and sha256 (PEP 751)."
    assert header[1].startswith("# first, check this machine: python3 check_box.py")
    assert header[2] == f"# before the wheels, the ROCm SDK the chain was built with, with the GPU code of each gpu target: {sdk_install}"
    assert header[3] == prebuilt_step
    assert header[4:6] == ["# then install, from this directory, into a new venv or over an older set in one:", "#   uv pip install --offline -r pylock.toml"]
    assert header[-2] == "# then, before running Python: . ./env.sh  (the run-time environment: FLASH_ATTENTION_TRITON_AMD_ENABLE)"
    assert header[-1].startswith("# (requirements.txt holds the same wheels for pip: pip install --no-index")
    assert text.count("[[packages]]") == 3 and f'index = "{INDEX}"' in text
    assert f'path = "wheels/{VLLM}", hashes = {{sha256 = "{"11" * 32}"}}' in text
