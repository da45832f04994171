"""The files of an install set that standard tools read: `sbom.cdx.json` (CycloneDX: every
wheel of `wheels/` by sha256, and what the set expects the box to provide) and `pylock.toml`
(PEP 751: the same wheels by relative path and sha256, which `uv pip install -r pylock.toml`
installs offline). Both are made by the scripts (stdlib only: scripts/sbom.py, scripts/pylock.py)
that the tests also load in the resolve that holds cyclonedx-python-lib and uv.

A helper, not a rule: what it reads is in the install set's request already, and it writes two
small files."""

from __future__ import annotations

import json
from typing import Dict, List, Sequence, Tuple

from pants.engine.fs import FileContent

from rocm_build.install.box_check import CHECK_STEP
from rocm_build.install.runtime_set import RuntimeSet, header_lines
from rocm_build.prepare.inputs import BuiltRocmWheel
from rocm_build.scripts import pylock, sbom

# The uv way, in both headers: the same wheels by path and sha256, no index, no resolution.
UV_INSTALL = "uv pip install --offline -r pylock.toml"
UV_STEP = (
    "# or, with uv, the same wheels by path and sha256 (pylock.toml, PEP 751), from this directory:",
    f"#   {UV_INSTALL}",
)


def set_wheels(closure: Sequence[BuiltRocmWheel], runtime: RuntimeSet) -> List[Dict[str, str]]:
    """Every wheel of the set's wheels/, by what it is: built here (by its target), someone
    else's (by pin and index), or a locked run-time requirement."""
    wheels = []
    for w in closure:
        source = json.loads(w.build_info)["source"]
        if "prebuilt" in source:
            wheels.append({"file": w.wheel_name or "", "sha256": w.wheel_sha256, "origin": "prebuilt", "pin": source["prebuilt"], "index_url": source["index_url"]})
        else:
            wheels.append({"file": w.wheel_name or "", "sha256": w.wheel_sha256, "origin": "built", "target": w.address.spec})
    wheels += [{"file": d.filename, "sha256": d.sha256, "origin": "locked", "lock": "the chain's run-time lock"} for d in runtime.dists]
    return wheels


def supply_chain_files(
    closure: Tuple[BuiltRocmWheel, ...], runtime: RuntimeSet, gpu_targets: Sequence[str], prebuilt_steps: Sequence[str]
) -> Tuple[FileContent, FileContent]:
    """`sbom.cdx.json` and `pylock.toml` of the set of `closure` (the target packaged last).
    `prebuilt_steps`: the header's steps for prebuilt wheels that need their own index."""
    wheels = set_wheels(closure, runtime)
    index, version = runtime.sdk_release or ("", "")
    box = {
        "gpu_targets": list(gpu_targets),
        "sdk": {"index": index, "version": version, "requirement": runtime.sdk_install} if runtime.sdk_release else None,
        "sdk_modules": [(module, target) for module, target, _ in runtime.sdk],
    }
    owner = closure[-1].address.spec
    # pylock.toml's header: requirements.txt's steps, with uv's install command in pip's place.
    header = [
        f"# The rocm_wheel chain of one `pants package` ({owner}): every wheel of wheels/ by path and sha256 (PEP 751).",
        CHECK_STEP,
        *header_lines(runtime, (*prebuilt_steps, "# then install, from this directory, into a new venv or over an older set in one:", f"#   {UV_INSTALL}")),
        "# (requirements.txt holds the same wheels for pip: pip install --no-index --find-links wheels --require-hashes -r requirements.txt)",
    ]
    return (
        FileContent(sbom.SET_SBOM, sbom.install_set_sbom(owner, wheels, box)),
        FileContent(pylock.FILE, pylock.pylock(wheels, header).encode()),
    )
