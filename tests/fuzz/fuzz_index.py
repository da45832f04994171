"""Fuzz target: the package index client (scripts/simple_index.py: PEP 503 HTML and PEP 691
JSON pages) and update-pins' choice among the files an index lists (pins/update/prebuilt_index.py).
An index is not ours: whatever it serves must end in an OSError (which fetch and update-pins
report with the index's URL) or in a list of files, never in a traceback."""

from __future__ import annotations

import io
import sys

from packaging.version import InvalidVersion

from rocm_build.pins.tables import PrebuiltPin
from rocm_build.pins.update import prebuilt_index as prebuilt_update
from rocm_build.pins.update.prebuilt_index import IndexFile, newest, requires_rocm, simple_index

INDEX = simple_index()
INSTRUMENTED = [INDEX, prebuilt_update]
# Inputs in the suite's run (~3 s here; a 12 s run (142k inputs) covered no more).
RUNS = 32_768
# Crashes found and reported, not yet fixed: prebuilt_update.fits lets packaging's
# InvalidVersion through for a file name with a bad version; requires_rocm lets a ValueError
# through for METADATA with a NUL byte. Remove each when its test in plugin_parsers_test.py passes.
INDEX_URL = "https://index.example/simple/"
PIN = PrebuiltPin(index_url=INDEX_URL, project="torch", track=">=2.13.0a0,<2.14", python="3.12")
KINDS = ("application/vnd.pypi.simple.v1+json", "text/html", "")


class Response(io.BytesIO):
    """What `_open` returns: a body and its Content-Type."""

    def __init__(self, body: bytes, kind: str) -> None:
        super().__init__(body)
        self.headers = {"Content-Type": kind}


SEEDS = [
    b"\x00" + b'{"meta": {"api-version": "1.0"}, "name": "torch", "files": [{"filename": '
    b'"torch-2.13.0-cp312-cp312-linux_x86_64.whl", "url": "../../f/torch-2.13.0-cp312-cp312-linux_x86_64.whl",'
    b' "hashes": {"sha256": "' + b"a" * 64 + b'"}, "core-metadata": true}]}',
    b"\x01" + b'<!DOCTYPE html><html><body><a href="/f/torch-2.13.0%2Brocm-cp312-cp312-manylinux_2_28_x86_64.whl'
    b'#sha256=' + b"b" * 64 + b'" data-core-metadata="sha256=c">torch</a>\n<a href="torch-2.12.0-py3-none-any.whl">x</a></body></html>',
    b"\x02Metadata-Version: 2.1\nName: torch\nRequires-Dist: rocm[libraries]==7.14.0; extra == 'rocm'\n",
]


def test_one_input(data: bytes) -> None:
    if not data:
        return
    kind, body = KINDS[data[0] % len(KINDS)], data[1:]
    INDEX._open = lambda url, accept=None: Response(body, kind)
    try:
        rows = INDEX.project_files(INDEX_URL, "torch")
    except OSError:
        return
    files = [IndexFile(*row) for row in rows]
    for f in files:
        assert isinstance(f.name, str) and isinstance(f.url, str), f
    try:
        newest(PIN, files)
    except InvalidVersion:
        pass  # reported, as above
    try:
        requires_rocm(body.decode("utf-8", errors="replace"))
    except ValueError:
        pass  # reported, as above


if __name__ == "__main__":
    from fuzz.harness import main

    main(sys.modules[__name__], sys.argv)
