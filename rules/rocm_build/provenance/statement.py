"""The provenance of a wheel we built: an in-toto Statement v1 whose subject is the wheel (file
name and sha256) and whose predicate is SLSA provenance v1, made from the wheel's build info:
the target and its options as the external parameters, and every input by digest (upstream,
patches, the build-requirements lock and its wheels, archives, the dependency wheels, the
toolchain, the image). It goes into a DSSE envelope, signed when the user gives a key
(signing.py), with no signature otherwise.

Plain functions: they read a build info that is already in memory. No time and no run id in it:
the same wheel gives the same statement, so anyone can rebuild (`verify-reproducible`) and check
the subject against what they got.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Dict, List, Mapping, Sequence

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
# What a `rocm_wheel` build is, for a verifier: the parameters below and how to rebuild
# (docs/supply-chain.md). Under the project, as SLSA asks of a build type.
PROJECT = "https://github.com/rocm-pants/rocm-pants"
BUILD_TYPE = f"{PROJECT}/blob/main/docs/supply-chain.md#the-build-type-rocm_wheel-v1"
BUILDER_ID = f"{PROJECT}/blob/main/docs/supply-chain.md#the-builder"
SUFFIX = ".intoto.jsonl"


def pypi_purl(name: str, version: str) -> str:
    return f"pkg:pypi/{re.sub(r'[-_.]+', '-', name).lower()}@{version.replace('+', '%2B')}"


def resolved_dependencies(info: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Every input of the build by digest, as SLSA's ResourceDescriptors."""
    source = info["source"]
    out: List[Dict[str, Any]] = []
    if "commit" in source:
        out.append({"name": source["pin"], "uri": f"git+{source['url']}@{source['commit']}", "digest": {"gitCommit": source["commit"]}})
    else:
        out.append({"name": source["pin"], "uri": source["url"], "digest": {"sha256": source["sha256"]}})
    out += [{"name": p["path"], "digest": {"sha256": p["sha256"]}, "annotations": {"role": "patch"}} for p in source.get("patches", ())]
    lock = info.get("build_requirements")
    if lock:
        out.append({"name": lock["lock"], "digest": {"sha256": lock["sha256"]}, "annotations": {"role": "build-requirements lock"}})
        out += [
            {"name": w["file"], "uri": pypi_purl(w["name"], w["version"]), "digest": {"sha256": w["sha256"]}, "annotations": {"role": "build requirement"}}
            for w in lock.get("wheels", ())
        ]
    for var, archive in sorted((info.get("archives") or {}).items()):
        out.append({"name": var, "uri": archive["url"], "digest": {"sha256": archive["sha256"]}, "annotations": {"role": "archive", "target": archive["target"]}})
    for dep in info.get("dependencies", ()):
        dep_source = dep.get("source", {})
        if "prebuilt" in dep_source:
            # Someone else's wheel: by its pinned sha256, from its index.
            said = {"role": "dependency wheel", "origin": "prebuilt", "pin": dep_source["prebuilt"], "index_url": dep_source["index_url"]}
        else:
            said = {"role": "dependency wheel", "origin": "built here, before its build info was added", "target": dep["target"]}
        out.append({"name": dep["wheel"], "digest": {"sha256": dep["payload_sha256"]}, "annotations": said})
    toolchain = info["toolchain"]
    out.append({"name": toolchain["address"], "content": base64.b64encode(toolchain["identity"].encode()).decode(), "annotations": {"role": "toolchain identity"}})
    image = (info.get("environment") or {}).get("image_id", "")
    if image:
        algorithm, _, hexdigest = image.partition(":")
        out.append({"name": info["environment"]["name"], "digest": {algorithm: hexdigest}, "annotations": {"role": "build image"}})
    return out


def statement(info: Mapping[str, Any], wheel_name: str, wheel_sha256: str, pants_version: str) -> Dict[str, Any]:
    """The statement about the wheel `wheel_name` with sha256 `wheel_sha256`, from its build info."""
    external = {
        "target": info["target"],
        "gpu_targets": info["gpu_targets"],
        "allow_missing_gpu_targets": info.get("allow_missing_gpu_targets", []),
        "env": info.get("env", {}),
        "recipe": info.get("recipe", {}),
        "python": info["python"],
        "toolchain": info["toolchain"]["address"],
        "environment": (info.get("environment") or {}).get("name", ""),
        "network": info.get("network", ""),
    }
    internal = {
        "label": info.get("label", ""),
        "source_date_epoch": info.get("source_date_epoch"),
        "version_key": info.get("version_key", {}),
        "payload_sha256": info.get("payload_sha256", ""),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": wheel_name, "digest": {"sha256": wheel_sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": external,
                "internalParameters": internal,
                "resolvedDependencies": resolved_dependencies(info),
            },
            "runDetails": {"builder": {"id": BUILDER_ID, "version": {"pants": pants_version}}},
        },
    }


def payload(statement_: Mapping[str, Any]) -> bytes:
    return json.dumps(statement_, sort_keys=True, separators=(",", ":")).encode()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what a signature signs."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def envelope(body: bytes, signatures: Sequence[Mapping[str, str]]) -> bytes:
    """One line of `<wheel>.intoto.jsonl`: the DSSE envelope (no signature: unsigned)."""
    doc = {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(body).decode(), "signatures": list(signatures)}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
