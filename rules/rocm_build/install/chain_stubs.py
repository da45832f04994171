"""The chain's own wheels, as a run-time resolve must see them: present, at the chain's version.

A run-time requirement may need a package the chain builds (vLLM's peft and timm need torch and
torchvision). Resolved against an index alone, pip would lock PyPI's torch and the CUDA wheels
it pulls in; the install set gets the chain's torch instead. So the resolve also sees one stub
wheel per chain distribution (a name, a version, no files, no dependencies) in a find-links
directory, with a constraint only the stub meets, and the lock leaves those names out, saying
which target brings them. The stubs exist only in the resolve's sandbox.

A version the chain does not know before building (a pin without one) gets no stub: its name is
still left out, but what the index's release of it requires may enter the lock.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zipfile
from typing import Dict, List, Sequence, Tuple

STUB_DIR = "chain-wheels"
CONSTRAINTS = "chain-constraints.txt"
# A local label no index serves, added to a version that has none, so that only the stub can
# meet the constraint (`torch==2.13.0+chain` is not PyPI's torch 2.13.0).
LOCAL = "chain"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member times: the same stub bytes every time


def stub_version(version: str) -> str:
    return version if "+" in version else f"{version}+{LOCAL}"


def left_out_key(name: str) -> str:
    """The key lockfile.from_pip_report compares names by (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def stub_wheel(name: str, version: str, requires: Sequence[str] = ()) -> Tuple[str, bytes]:
    """(file name, bytes) of a wheel holding only its metadata (a chain's stub has no `requires`)."""
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    members = {
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: rocm-pants chain stub\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in members.items()
    ]
    members[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for path, data in members.items():
            z.writestr(zipfile.ZipInfo(path, _EPOCH), data)
    return f"{dist}-{version}-py3-none-any.whl", out.getvalue()


def chain_stubs(dists: Sequence[Tuple[str, str, str]]) -> Tuple[Dict[str, bytes], Dict[str, str]]:
    """From (distribution, version or "", target) of a chain: the files to put in the resolve's
    sandbox (stub wheels under STUB_DIR and CONSTRAINTS), and the names the lock leaves out,
    with why (lockfile.from_pip_report's `also_left_out`)."""
    files: Dict[str, bytes] = {}
    constraints: List[str] = []
    left_out: Dict[str, str] = {}
    for name, version, owner in dists:
        left_out[left_out_key(name)] = f"provided by the chain: {owner}"
        if version:
            filename, data = stub_wheel(name, stub_version(version))
            files[f"{STUB_DIR}/{filename}"] = data
            constraints.append(f"{name}=={stub_version(version)}")
    files[CONSTRAINTS] = "".join(f"{c}\n" for c in constraints).encode()
    return files, left_out


def resolve_args() -> Tuple[str, ...]:
    """pip options that make the stubs visible to `pip install --dry-run`."""
    return ("--find-links", STUB_DIR, "--constraint", CONSTRAINTS)
