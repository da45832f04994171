"""Rewrites built wheels reproducibly: the ROCm label, then the build-info file.

Usage:
  wheel_files.py label WHEEL OUT_DIR LABEL [CHUNK_CACHE]
                                               version gets `+LABEL` (or `.LABEL` after an
                                               existing local part), dist-info renamed
  wheel_files.py add-info WHEEL OUT_DIR INFO [PLATFORM]
                                               adds `rocm_build_info.json` to the dist-info
                                               and an SBOM made from it (sbom.py: PEP 770's
                                               `sboms/`), and to METADATA a `Requires-Dist: name==version`
                                               for each dependency wheel INFO lists; the
                                               version gets INFO's `version_key` label (`.kLABEL`:
                                               which build this is); with PLATFORM (a manylinux
                                               tag auditwheel found the wheel consistent with),
                                               tags the wheel with it

Both rewrite RECORD and write members in a fixed order with a fixed timestamp and
normalized permissions, so the same contents give the same bytes on every machine. The
build writes the labelled wheel (what dependents build against, so a rebuild with the same
output changes nothing downstream); build info and the exact requirements on the dependency
wheels, which record inputs, are added afterwards, and so is the digest of those inputs in
the version (`1.0.0+llvm19gfx1151.k1a2b3c4d5e6f7a8b`): dependents build against the wheel without it, so
a dependency that comes out the same does not rebuild them, and a wheel that ships other bytes
has another version, which `pip install` in a venv holding the old one installs.
"""

import csv
import io
import json
import os
import re
import sys
import zipfile

from wheel_zip import WheelZip, raw_entries

BUILD_INFO = "rocm_build_info.json"


class Stream:
    """A member read from a zip (inflated as it is written again)."""

    def __init__(self, archive, info):
        self.archive, self.info = archive, info


class Raw:
    """A member copied from a zip as it is stored, with its RECORD line from that zip."""

    def __init__(self, entry, record):
        self.entry, self.record = entry, record


def mode_of(info):
    return info.external_attr >> 16


def write_wheel(target, info_dir, members, chunk_cache=None):
    """Members (path, content, mode) sorted (dist-info last, as the wheel spec recommends),
    RECORD rewritten. Content: bytes, a Stream or a Raw. With `chunk_cache`, deflated chunks
    of earlier wheels are reused (wheel_zip.py): the bytes are the same either way."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    members = [m for m in members if m[0] != f"{info_dir}/RECORD"]
    members.sort(key=lambda m: (m[0].startswith(info_dir + "/"), m[0]))
    out = WheelZip(target, chunk_cache)
    try:
        lines = []
        for path, content, mode in members:
            if isinstance(content, Raw):
                out.add_raw(path, mode, content.entry)
                lines.append(content.record)
            elif isinstance(content, Stream):
                with content.archive.open(content.info) as stream:
                    lines.append(out.add(path, mode, stream, content.info.file_size))
            else:
                lines.append(out.add_bytes(path, mode, content))
        out.add_bytes(f"{info_dir}/RECORD", 0o644, "\n".join([*lines, f"{info_dir}/RECORD,,", ""]).encode())
        out.finish()
    except BaseException:
        out.abandon()
        raise


def record_of(src, info_dir):
    """path -> RECORD line of a wheel we wrote."""
    with zipfile.ZipFile(src) as wheel:
        text = wheel.read(f"{info_dir}/RECORD").decode()
    return {next(csv.reader([line]))[0]: line for line in text.splitlines() if line}


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def require_built_against(metadata, wheels):
    """`Requires-Dist: name==version` for each dependency wheel, local label included: a
    wheel built against torch 2.13.0+rocm7.14gfx1151 has that torch's ABI and no other's.
    Unconditional requirements on the same names (`torch`, `torch>=2`) give way to them."""
    pins = {}
    for wheel in sorted(wheels):
        name, version = wheel.split("-")[:2]
        pins[_canonical(name)] = f"Requires-Dist: {name}=={version}".encode()
    if not pins:
        return metadata
    head, sep, body = metadata.partition(b"\n\n")
    kept = []
    for line in head.rstrip(b"\n").split(b"\n"):
        m = re.match(rb"Requires-Dist:\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*([^;]*)$", line)
        if not (m and _canonical(m.group(1).decode()) in pins):
            kept.append(line)
    return b"\n".join([*kept, *pins.values()]) + (sep or b"\n") + body


def with_local(version, segment):
    """`version` with `segment` appended to its local label (PEP 440: `+a` then `.b`)."""
    return f"{version}{'.' if '+' in version else '+'}{segment}"


def renamed_record(line, old_info, new_info):
    """A RECORD line of a dist-info member, under the renamed dist-info directory."""
    row = next(csv.reader([line]))
    row[0] = new_info + row[0][len(old_info):]
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(row)
    return out.getvalue()


def set_version(metadata, version):
    return re.sub(rb"(?m)^Version: .*$", f"Version: {version}".encode(), metadata, count=1)


def label(src, out_dir, label, chunk_cache=None):
    name, version, rest = os.path.basename(src).split("-", 2)
    new_version = with_local(version, label)
    old_info, new_info = f"{name}-{version}.dist-info", f"{name}-{new_version}.dist-info"
    target = os.path.join(out_dir, f"{name}-{new_version}-{rest}")
    with zipfile.ZipFile(src) as wheel:
        members = []
        for info in wheel.infolist():
            if info.is_dir():
                continue
            path, content = info.filename, Stream(wheel, info)
            if path.startswith(old_info + "/"):
                path = new_info + path[len(old_info):]
                if path == f"{new_info}/METADATA":
                    content = set_version(wheel.read(info), new_version)
            members.append((path, content, mode_of(info)))
        write_wheel(target, new_info, members, chunk_cache)
    print(f"labelled {os.path.basename(src)} -> {os.path.basename(target)}")


def retag(wheel_metadata, file_name, platform):
    """WHEEL's `Tag:` lines and the file name with PLATFORM instead of their platform."""
    stem, _ = os.path.splitext(file_name)
    *front, _ = stem.split("-")
    data = re.sub(rb"(?m)^(Tag: [^-\n]+-[^-\n]+-).*$", rb"\g<1>" + platform.encode(), wheel_metadata)
    return data, "-".join([*front, platform]) + ".whl"


def add_info(src, out_dir, info_path, platform=None):
    """The members but METADATA, WHEEL and RECORD are copied as they are stored: a GB wheel
    is not inflated and deflated again for a few lines of text."""
    # Imported here: a build's sandbox ships this file for `label` alone (build_process.py), so
    # the SBOM's writer is not an input of every build.
    import sbom

    name, version, rest = os.path.basename(src).split("-", 2)
    old_info = f"{name}-{version}.dist-info"
    with open(info_path, "rb") as f:
        info = f.read()
    parsed = json.loads(info)
    built_against = [d["wheel"] for d in parsed["dependencies"]]
    key = parsed.get("version_key")
    new_version = with_local(version, key["label"]) if key else version
    info_dir = f"{name}-{new_version}.dist-info"
    target_name = f"{name}-{new_version}-{rest}"
    records = record_of(src, old_info)
    members = []
    with zipfile.ZipFile(src) as wheel:
        for path, entry in raw_entries(src).items():
            content = Raw(entry, records[path])
            if path.startswith(old_info + "/"):
                content = Raw(entry, renamed_record(records[path], old_info, info_dir))
                path = info_dir + path[len(old_info):]
            if path == f"{info_dir}/METADATA":
                content = require_built_against(set_version(wheel.read(entry.info), new_version), built_against)
            if path == f"{info_dir}/WHEEL" and platform:
                content, target_name = retag(wheel.read(entry.info), target_name, platform)
            if path not in (f"{info_dir}/{BUILD_INFO}", f"{info_dir}/{sbom.WHEEL_SBOM}"):
                members.append((path, content, mode_of(entry.info)))
    members.append((f"{info_dir}/{BUILD_INFO}", info, 0o644))
    # Made from the build info and the version, both covered by the version key: the key still
    # covers every byte this writes.
    members.append((f"{info_dir}/{sbom.WHEEL_SBOM}", sbom.wheel_sbom(parsed, name, new_version), 0o644))
    write_wheel(os.path.join(out_dir, target_name), info_dir, members)


def main():
    command, *args = sys.argv[1:]
    {"label": label, "add-info": add_info}[command](*args)


if __name__ == "__main__":
    main()
