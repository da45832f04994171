"""wheel_files.py on a real wheel: labelled, then given its build info; RECORD matches every
member and the build info copies the other members' stored bytes as they are."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

from rocm_build.scripts import sbom, wheel_zip
from rocm_build.testutil.script_runs import run_script

# As the build runs it (build_process.py, build_output.py): by path, what it imports beside it.
WHEEL_FILES = ("wheel_files.py", "wheel_zip.py", "sbom.py")

MEMBERS = {
    "pkg/__init__.py": b"ARCHS = ['gfx1151']\n",
    "pkg/odd,name.py": b"x = 1\n",  # RECORD is CSV: this path is quoted there
    "pkg/_C.so": bytes(range(256)) * 4096,
    "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nRequires-Dist: torch>=2\n\nbody\n",
    "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: setuptools\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
    "pkg-1.0.dist-info/RECORD": b"",
}


def records(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as archive:
        info_dir = next(n.split("/")[0] for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(f"{info_dir}/RECORD").decode())))
        contents = {n: archive.read(n) for n in archive.namelist()}
    for path, digest, size in rows:
        if path.endswith("/RECORD"):
            assert (digest, size) == ("", "")
            continue
        expected = base64.urlsafe_b64encode(hashlib.sha256(contents[path]).digest()).rstrip(b"=").decode()
        assert (digest, int(size)) == (f"sha256={expected}", len(contents[path])), path
    assert sorted(r[0] for r in rows) == sorted(contents)
    return contents


def test_label_then_build_info(tmp_path: Path) -> None:
    src = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_STORED) as archive:  # as bdist_wheel stores them
        for name, data in MEMBERS.items():
            archive.writestr(name, data)
    run_script(tmp_path, WHEEL_FILES, "label", str(src), str(tmp_path / "labelled"), "rocm7gfx1151", str(tmp_path / "chunks"))
    labelled = tmp_path / "labelled" / "pkg-1.0+rocm7gfx1151-cp311-cp311-linux_x86_64.whl"
    contents = records(labelled)
    assert contents["pkg-1.0+rocm7gfx1151.dist-info/METADATA"].splitlines()[2] == b"Version: 1.0+rocm7gfx1151"
    assert contents["pkg/_C.so"] == MEMBERS["pkg/_C.so"]

    info = tmp_path / "info.json"
    dependency = "torch-2.9.0+rocm7gfx1151.k0badcafe-cp311-cp311-linux_x86_64.whl"
    source = {"pin": "pkg", "url": "https://github.com/example/pkg", "commit": "ab" * 20, "patches": []}
    build_info = {
        "target": "components/pkg:wheel", "gpu_targets": ["gfx1151"], "source": source, "python": "CPython 3.11.7",
        "toolchain": {"address": "components:llvm", "identity": "provider=llvm\nversion=\nclang 19"},
        "dependencies": [{"target": "components/torch:wheel", "wheel": dependency, "payload_sha256": "cd" * 32, "source": source}],
        "version_key": {"label": "k1a2b3c4d", "digest": "1a2b3c4d"},
    }  # fmt: skip
    info.write_text(json.dumps(build_info))
    run_script(tmp_path, WHEEL_FILES, "add-info", str(labelled), str(tmp_path / "final"), str(info), "manylinux_2_28_x86_64")
    # The version says which build it is; the dist-info directory and RECORD follow it.
    final = tmp_path / "final" / "pkg-1.0+rocm7gfx1151.k1a2b3c4d-cp311-cp311-manylinux_2_28_x86_64.whl"
    contents = records(final)
    assert not [n for n in contents if n.startswith("pkg-1.0+rocm7gfx1151.dist-info/")]
    metadata = contents["pkg-1.0+rocm7gfx1151.k1a2b3c4d.dist-info/METADATA"]
    assert metadata.splitlines()[2] == b"Version: 1.0+rocm7gfx1151.k1a2b3c4d"
    assert b"Requires-Dist: torch==2.9.0+rocm7gfx1151.k0badcafe" in metadata and b"torch>=2" not in metadata
    # The platform tag auditwheel gave (audits/portable.py), in the name and in WHEEL's `Tag:` alone.
    assert contents["pkg-1.0+rocm7gfx1151.k1a2b3c4d.dist-info/WHEEL"] == (
        b"Wheel-Version: 1.0\nGenerator: setuptools\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_28_x86_64\n"
    )
    assert contents["pkg-1.0+rocm7gfx1151.k1a2b3c4d.dist-info/rocm_build_info.json"] == info.read_bytes()
    # Its SBOM (PEP 770), made from that build info and the version, listed in RECORD (records()).
    assert contents["pkg-1.0+rocm7gfx1151.k1a2b3c4d.dist-info/sboms/rocm-pants.cdx.json"] == sbom.wheel_sbom(
        build_info, "pkg", "1.0+rocm7gfx1151.k1a2b3c4d"
    )
    # The package's members are the labelled wheel's stored bytes, not deflated again.
    before, after = wheel_zip.raw_entries(str(labelled)), wheel_zip.raw_entries(str(final))
    for name in ("pkg/__init__.py", "pkg/odd,name.py", "pkg/_C.so"):
        raw = [(Path(e.path).read_bytes()[e.data_offset:e.data_offset + e.info.compress_size]) for e in (before[name], after[name])]
        assert raw[0] == raw[1], name
