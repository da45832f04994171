"""Gives a built wheel its ROCm local version label and build-info file, reproducibly.

Usage: label_wheel.py WHEEL OUT_DIR LABEL BUILD_INFO_JSON
The version gets `+LABEL` (or `.LABEL` after an existing local part), the dist-info dir is
renamed to match, `rocm_build_info.json` is added to it and RECORD is rewritten. Entries
get a fixed timestamp so the same inputs give the same bytes on every machine.
"""

import base64
import hashlib
import os
import re
import sys
import zipfile

FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main():
    src, out_dir, label, info_path = sys.argv[1:]
    name, version, rest = os.path.basename(src).split("-", 2)
    new_version = f"{version}{'.' if '+' in version else '+'}{label}"
    old_info, new_info = f"{name}-{version}.dist-info", f"{name}-{new_version}.dist-info"
    entries = []
    with zipfile.ZipFile(src) as wheel:
        for item in wheel.infolist():
            path, data = item.filename, wheel.read(item)
            if path.startswith(old_info + "/"):
                path = new_info + path[len(old_info):]
                if path == f"{new_info}/RECORD":
                    continue
                if path == f"{new_info}/METADATA":
                    data = re.sub(rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), data, count=1)
            entries.append((path, data, item.external_attr))
    entries.append((f"{new_info}/rocm_build_info.json", open(info_path, "rb").read(), 0o644 << 16))
    # Dist-info last, as the wheel spec recommends; otherwise keep the builder's order.
    entries.sort(key=lambda e: (e[0].startswith(new_info + "/"), e[0]))
    record = "\n".join([*(record_line(p, d) for p, d, _ in entries), f"{new_info}/RECORD,,", ""])
    entries.append((f"{new_info}/RECORD", record.encode(), 0o644 << 16))
    target = os.path.join(out_dir, f"{name}-{new_version}-{rest}")
    with zipfile.ZipFile(target + ".part", "w", zipfile.ZIP_DEFLATED) as out:
        for path, data, attr in entries:
            info = zipfile.ZipInfo(path, FIXED_TIME)
            info.external_attr = attr or (0o644 << 16)
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, data)
    os.replace(target + ".part", target)
    print(f"labelled {os.path.basename(src)} -> {os.path.basename(target)}")


if __name__ == "__main__":
    main()
