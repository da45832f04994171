"""Rewrites built wheels reproducibly: the ROCm label, then the build-info file.

Usage:
  wheel_files.py label WHEEL OUT_DIR LABEL      version gets `+LABEL` (or `.LABEL` after an
                                               existing local part), dist-info renamed
  wheel_files.py add-info WHEEL OUT_DIR INFO [PLATFORM]
                                               adds `rocm_build_info.json` to the dist-info,
                                               and to METADATA a `Requires-Dist: name==version`
                                               for each dependency wheel INFO lists; with
                                               PLATFORM (a manylinux tag auditwheel found the
                                               wheel consistent with), tags the wheel with it

Both rewrite RECORD and write members in a fixed order with a fixed timestamp and
normalized permissions, so the same contents give the same bytes on every machine. The
build writes the labelled wheel (what dependents build against, so a rebuild with the same
output changes nothing downstream); build info and the exact requirements on the dependency
wheels, which record inputs, are added afterwards.
"""

import base64
import hashlib
import json
import os
import re
import sys
import zipfile

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
BUILD_INFO = "rocm_build_info.json"


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def read_members(src):
    with zipfile.ZipFile(src) as wheel:
        return [(i.filename, wheel.read(i), i.external_attr >> 16) for i in wheel.infolist() if not i.is_dir()]


def write_wheel(target, info_dir, members):
    """Members sorted (dist-info last, as the wheel spec recommends), RECORD rewritten."""
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    members = [m for m in members if m[0] != f"{info_dir}/RECORD"]
    members.sort(key=lambda m: (m[0].startswith(info_dir + "/"), m[0]))
    record = "\n".join([*(record_line(p, d) for p, d, _ in members), f"{info_dir}/RECORD,,", ""])
    members.append((f"{info_dir}/RECORD", record.encode(), 0o644))
    with zipfile.ZipFile(target + ".part", "w", zipfile.ZIP_DEFLATED) as out:
        for path, data, mode in members:
            info = zipfile.ZipInfo(path, FIXED_TIME)
            info.external_attr = (0o100755 if mode & 0o111 else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, data)
    os.replace(target + ".part", target)


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


def label(src, out_dir, label):
    name, version, rest = os.path.basename(src).split("-", 2)
    new_version = f"{version}{'.' if '+' in version else '+'}{label}"
    old_info, new_info = f"{name}-{version}.dist-info", f"{name}-{new_version}.dist-info"
    members = []
    for path, data, mode in read_members(src):
        if path.startswith(old_info + "/"):
            path = new_info + path[len(old_info):]
            if path == f"{new_info}/METADATA":
                data = re.sub(rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), data, count=1)
        members.append((path, data, mode))
    target = os.path.join(out_dir, f"{name}-{new_version}-{rest}")
    write_wheel(target, new_info, members)
    print(f"labelled {os.path.basename(src)} -> {os.path.basename(target)}")


def retag(wheel_metadata, file_name, platform):
    """WHEEL's `Tag:` lines and the file name with PLATFORM instead of their platform."""
    stem, _ = os.path.splitext(file_name)
    *front, _ = stem.split("-")
    data = re.sub(rb"(?m)^(Tag: [^-\n]+-[^-\n]+-).*$", rb"\g<1>" + platform.encode(), wheel_metadata)
    return data, "-".join([*front, platform]) + ".whl"


def add_info(src, out_dir, info_path, platform=None):
    name, version, _ = os.path.basename(src).split("-", 2)
    info_dir = f"{name}-{version}.dist-info"
    target_name = os.path.basename(src)
    with open(info_path, "rb") as f:
        info = f.read()
    built_against = [d["wheel"] for d in json.loads(info)["dependencies"]]
    members = []
    for path, data, mode in read_members(src):
        if path == f"{info_dir}/METADATA":
            data = require_built_against(data, built_against)
        if path == f"{info_dir}/WHEEL" and platform:
            data, target_name = retag(data, target_name, platform)
        if path != f"{info_dir}/{BUILD_INFO}":
            members.append((path, data, mode))
    members.append((f"{info_dir}/{BUILD_INFO}", info, 0o644))
    write_wheel(os.path.join(out_dir, target_name), info_dir, members)


def main():
    command, *args = sys.argv[1:]
    {"label": label, "add-info": add_info}[command](*args)


if __name__ == "__main__":
    main()
