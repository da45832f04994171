"""CycloneDX 1.6 SBOMs (JSON) of what we ship: the one inside each wheel we build (PEP 770:
`<name>.dist-info/sboms/`) and the one of an install set (`sbom.cdx.json`).

Standard library only: `wheel_files.py add-info` writes a wheel's SBOM in the process that adds
its build info, and the plugin loads this file for the install set's (script_modules.py).

A wheel's SBOM is made from its `rocm_build_info.json` alone, and from its name and version
(which the version key gives): every byte of it is covered by the version key, as the build info
is (`gpu_code` and `platform`, which the key leaves out, are read from the payload it covers; we
leave them out of the SBOM all the same). The image's `repo_digests` (what this machine's
container engine knows of it, not in the key) are left out: the image is its id. No timestamp,
and the serial number is a UUID derived from the content: the same build info gives the same
bytes, so a reproducible build stays reproducible.
"""

import hashlib
import json
import re
import uuid
from urllib.parse import quote

SPEC_VERSION = "1.6"
# PEP 770: SBOM files of a wheel live in its dist-info's sboms/ (auditwheel writes auditwheel.cdx.json).
WHEEL_SBOM = "sboms/rocm-pants.cdx.json"
SET_SBOM = "sbom.cdx.json"
TOOL = "rocm-pants"
# The namespace of our serial numbers (uuid5 of the document's sha256): any fixed UUID does; this
# one is uuid5(NAMESPACE_URL, "https://github.com/rocm-pants/rocm-pants/sbom").
SERIAL_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/rocm-pants/rocm-pants/sbom")
PREFIX = "rocm-pants:"  # of our property names (CycloneDX's property taxonomy: a namespace of one's own)


def canonical(name):
    """A project name as PEP 503 and purl's pypi type spell it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def name_version(wheel_file):
    name, version = wheel_file.split("-")[:2]
    return name, version


def dumps(doc):
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def finished(doc):
    """The document with its serial number: a UUID (version 5, as the schema's pattern asks)
    from the sha256 of the document without it, so that the same content has the same number."""
    body = {k: v for k, v in doc.items() if k != "serialNumber"}
    digest = hashlib.sha256(dumps(body)).hexdigest()
    return {**body, "serialNumber": f"urn:uuid:{uuid.uuid5(SERIAL_NAMESPACE, digest)}"}


def document(component, components, dependencies, properties=()):
    doc = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "lifecycles": [{"phase": "build"}],
            "tools": {"components": [{"type": "application", "name": TOOL}]},
            "component": component,
            **({"properties": props(properties)} if properties else {}),
        },
        "components": components,
        "dependencies": dependencies,
    }
    return dumps(finished(doc))


def props(pairs):
    return [{"name": PREFIX + name, "value": str(value)} for name, value in pairs]


def sha256(content):
    return [{"alg": "SHA-256", "content": content}]


def qualifiers(pairs):
    """purl qualifiers, sorted by key, values percent-encoded (purl spec)."""
    return "&".join(f"{k}={quote(v, safe=':/')}" for k, v in sorted(pairs.items()))


def pypi_purl(name, version, repository_url=""):
    purl = f"pkg:pypi/{canonical(name)}@{quote(version, safe='')}"
    return f"{purl}?{qualifiers({'repository_url': repository_url})}" if repository_url else purl


def git_purl(pin, url, commit):
    """A GitHub repository's own purl type; another git URL the generic type with vcs_url."""
    m = re.match(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$", url)
    if m:
        return f"pkg:github/{m.group(1).lower()}/{m.group(2).lower()}@{commit}"
    return f"pkg:generic/{quote(pin, safe='')}@{commit}?{qualifiers({'vcs_url': f'git+{url}@{commit}'})}"


def upstream_component(ref, source):
    """The upstream a wheel is built from: a git repository at a commit, or an archive by sha256;
    with our patches as its pedigree (each also a file component of its own, by sha256)."""
    pin, url = source["pin"], source["url"]
    if "commit" in source:
        commit = source["commit"]
        component = {
            "type": "library",
            "bom-ref": ref,
            "name": pin,
            "version": commit,
            "purl": git_purl(pin, url, commit),
            "externalReferences": [{"type": "vcs", "url": url, "comment": f"git commit {commit}"}],
        }
    else:
        digest = source["sha256"]
        component = {
            "type": "library",
            "bom-ref": ref,
            "name": pin,
            "version": f"sha256:{digest}",
            "hashes": sha256(digest),
            "purl": f"pkg:generic/{quote(pin, safe='')}?{qualifiers({'checksum': f'sha256:{digest}', 'download_url': url})}",
            "externalReferences": [{"type": "distribution", "url": url, "hashes": sha256(digest)}],
        }
    if source.get("patches"):
        # Ours, on top of the pinned upstream: CycloneDX's "unofficial" patches.
        component["pedigree"] = {"patches": [{"type": "unofficial", "diff": {"url": p["path"]}} for p in source["patches"]]}
    return component


def patch_components(source):
    return [
        {
            "type": "file",
            "bom-ref": f"patch:{p['path']}",
            "name": p["path"],
            "hashes": sha256(p["sha256"]),
            "scope": "excluded",
            "properties": props([("role", "patch"), ("applied-to", source["pin"])]),
        }
        for p in source.get("patches", ())
    ]


def from_index(name, version, index_url, file_sha256):
    """Where someone else's wheel comes from: its package URL and the index file, by sha256."""
    return {
        "purl": pypi_purl(name, version, index_url),
        "externalReferences": [{"type": "distribution", "url": index_url, "hashes": sha256(file_sha256)}],
    }


def dependency_component(dep):
    """A wheel the build installed into its venv: one of ours by the payload it was built against
    (that wheel before its build info; dist/ holds it with its build info and version key), or
    someone else's by its pinned file, sha256 and index."""
    name, version = name_version(dep["wheel"])
    source = dep.get("source", {})
    component = {
        "type": "library",
        "bom-ref": f"dependency:{canonical(name)}",
        "name": name,
        "version": version,
        "hashes": sha256(dep["payload_sha256"]),
        "scope": "required",
    }
    if "prebuilt" in source:
        component.update(from_index(name, version, source["index_url"], source["sha256"]))
        component["properties"] = props([("origin", "prebuilt: someone else's wheel, pinned by sha256"), ("pin", source["prebuilt"]), ("file", source["file"])])
    else:
        described = f"{source.get('pin', '')}@{source.get('commit') or source.get('sha256', '')}"
        component["properties"] = props(
            [
                ("origin", "built here: the hash is of the wheel its build wrote, before its build info was added"),
                ("target", dep["target"]),
                ("upstream", described),
            ]
        )
    return component


def build_requirement_components(requirements):
    """The locked build requirements, by the wheel's sha256 the lock pins (name==version only in a
    build info written before the lock's files were recorded)."""
    if not requirements:
        return []
    lock = {
        "type": "file",
        "bom-ref": "build-lock",
        "name": requirements["lock"],
        "hashes": sha256(requirements["sha256"]),
        "scope": "excluded",
        "properties": props([("role", "build-requirements lock")]),
    }
    wheels = requirements.get("wheels") or [dict(zip(("name", "version"), d.split("==", 1))) for d in requirements["distributions"]]
    out = [lock]
    for w in wheels:
        component = {
            "type": "library",
            "bom-ref": f"build-requirement:{canonical(w['name'])}",
            "name": w["name"],
            "version": w["version"],
            "purl": pypi_purl(w["name"], w["version"]),
            "scope": "excluded",
            "properties": props([("role", "build requirement"), ("lock", requirements["lock"]), *([("file", w["file"])] if "file" in w else [])]),
        }
        if "sha256" in w:
            component["hashes"] = sha256(w["sha256"])
        out.append(component)
    return out


def archive_components(archives):
    return [
        {
            "type": "file",
            "bom-ref": f"archive:{var}",
            "name": a["url"].rstrip("/").rsplit("/", 1)[-1] or var,
            "hashes": sha256(a["sha256"]),
            "scope": "excluded",
            "externalReferences": [{"type": "distribution", "url": a["url"], "hashes": sha256(a["sha256"])}],
            "properties": props([("role", "archive"), ("variable", var), ("target", a["target"])]),
        }
        for var, a in sorted(archives.items())
    ]


def toolchain_components(info):
    identity = info["toolchain"]["identity"]
    fields = dict(line.split("=", 1) for line in identity.splitlines() if re.match(r"^[a-z_]+=", line))
    toolchain = {
        "type": "application",
        "bom-ref": "toolchain",
        "name": info["toolchain"]["address"],
        **({"version": fields["version"]} if fields.get("version") else {}),
        "description": identity,
        "scope": "excluded",
        "properties": props([("role", "toolchain"), ("provider", fields.get("provider", ""))]),
    }
    implementation, _, version = info["python"].partition(" ")
    python = {
        "type": "platform",
        "bom-ref": "python",
        "name": implementation,
        **({"version": version} if version else {}),
        "scope": "excluded",
        "properties": props([("role", "the Python the wheel was built with and for")]),
    }
    out = [toolchain, python]
    environment = info.get("environment") or {}
    if environment.get("image_id"):
        image_id = environment["image_id"]
        image = {
            "type": "container",
            "bom-ref": "image",
            "name": environment["name"],
            "version": image_id,
            "scope": "excluded",
            "properties": props([("role", "build image")]),
        }
        if image_id.startswith("sha256:"):
            image["hashes"] = sha256(image_id[len("sha256:"):])
        out.append(image)
    return out


def wheel_sbom(info, name, version):
    """The SBOM of a wheel we built (PEP 770), from its build info, its name and its version."""
    deps = [dependency_component(d) for d in info.get("dependencies", ())]
    components = [
        upstream_component("upstream", info["source"]),
        *patch_components(info["source"]),
        *build_requirement_components(info.get("build_requirements")),
        *archive_components(info.get("archives") or {}),
        *toolchain_components(info),
        *deps,
    ]
    environment = info.get("environment") or {}
    wheel = {
        "type": "library",
        "bom-ref": "wheel",
        "name": name,
        "version": version,
        "properties": props(
            [
                ("target", info["target"]),
                ("gpu-targets", " ".join(info["gpu_targets"])),
                ("python", info["python"]),
                ("build-environment", environment.get("image_id") or f"{environment.get('name', '')} (this machine, no image)"),
                ("network", info.get("network", "")),
                ("source-date-epoch", info.get("source_date_epoch", "")),
                *([("version-key", info["version_key"]["digest"])] if info.get("version_key") else []),
                *([("payload-sha256", info["payload_sha256"])] if info.get("payload_sha256") else []),
                ("build-info", "rocm_build_info.json in this dist-info: every input of the build"),
            ]
        ),
    }
    refs = [c["bom-ref"] for c in components]
    dependencies = [
        # At run time the wheel needs the wheels it was built against (its Requires-Dist); it was
        # made from the rest.
        {"ref": "wheel", "dependsOn": [d["bom-ref"] for d in deps]},
        *({"ref": ref} for ref in refs if not ref.startswith("dependency:")),
        *({"ref": d["bom-ref"]} for d in deps),
    ]
    return document(wheel, components, dependencies)


def set_wheel_component(wheel):
    """A wheel in an install set's wheels/: {file, sha256, origin: built|prebuilt|locked, ...}."""
    name, version = name_version(wheel["file"])
    component = {
        "type": "library",
        "bom-ref": f"wheel:{wheel['file']}",
        "name": name,
        "version": version,
        "hashes": sha256(wheel["sha256"]),
        "scope": "required",
    }
    origin = wheel["origin"]
    if origin == "prebuilt":
        component.update(from_index(name, version, wheel["index_url"], wheel["sha256"]))
        said = [("origin", "prebuilt: someone else's wheel, pinned by sha256 from its index"), ("pin", wheel["pin"])]
    elif origin == "locked":
        component["purl"] = pypi_purl(name, version)
        said = [("origin", "run-time requirement: from the chain's run-time lock, by sha256"), ("lock", wheel.get("lock", ""))]
    else:
        said = [
            ("origin", "built here: its own SBOM is in its .dist-info/sboms/, its provenance beside it in dist/"),
            ("target", wheel["target"]),
        ]
    component["properties"] = props([*said, ("file", f"wheels/{wheel['file']}")])
    return component


def install_set_sbom(owner, wheels, box):
    """The SBOM of an install set: every wheel of its wheels/ by sha256, and what it expects the
    box to provide (`box`: {gpu_targets, sdk: {index, version, requirement} or None, sdk_modules})."""
    components = [set_wheel_component(w) for w in sorted(wheels, key=lambda w: w["file"])]
    expected = []
    sdk = box.get("sdk")
    if sdk:
        expected.append(
            {
                "type": "library",
                "bom-ref": "rocm-sdk",
                "name": "rocm",
                "version": sdk["version"],
                "purl": pypi_purl("rocm", sdk["version"], sdk["index"]),
                "scope": "required",
                "externalReferences": [{"type": "distribution", "url": sdk["index"]}],
                "properties": props([("provided-by", "the box: installed before the set, as requirements.txt's header says"), ("requirement", sdk["requirement"])]),
            }
        )
    for module, target in box.get("sdk_modules", ()):
        expected.append(
            {
                "type": "library",
                "bom-ref": f"sdk-module:{module}",
                "name": module,
                "scope": "required",
                "properties": props([("provided-by", "the ROCm SDK in the venv (it is on no index)"), ("required-by", target)]),
            }
        )
    component = {"type": "application", "bom-ref": "install-set", "name": f"{owner} install set"}
    refs = [c["bom-ref"] for c in (*components, *expected)]
    dependencies = [{"ref": "install-set", "dependsOn": refs}, *({"ref": r} for r in refs)]
    properties = [("gpu-targets", " ".join(box.get("gpu_targets", ()))), ("target", owner)]
    return document(component, [*components, *expected], dependencies, properties)
