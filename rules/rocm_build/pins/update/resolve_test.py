"""update-pins --resolve on archives (a real HTTP server on 127.0.0.1), and the BUILD-file side of
image pins. Prebuilt wheels, images pulled from a registry and the whole first run are in
tests/e2e/first_run_test.py."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from rocm_build.pins.update.image_pins import ImageMove, image_envs, pinned_build_file
from rocm_build.programs.update_pins import main
from rocm_build.testutil.git_fixtures import commit_files, init_repo

ARCHIVES = """\
# kept
[llvm]
url = "{base}/llvm.tar.gz"
sha256 = ""  # filled by update-pins --resolve
strip_prefix = "{prefix}"

[gone]
url = "{base}/gone.tar.gz"
sha256 = ""

[done]
url = "https://example.org/x.tar.gz"
sha256 = "{done}"
"""


def tarball(prefix: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = b"int main() { return 0; }\n"
        info = tarfile.TarInfo(f"{prefix}/main.c")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


GETS: list = []  # the paths the served site was asked for


@pytest.fixture
def served(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "llvm.tar.gz").write_bytes(tarball("llvm-3c709802"))
    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            GETS.append(self.path)
            super().do_GET()

        def log_message(self, *args) -> None:
            pass

    GETS.clear()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", site
    httpd.shutdown()


def resolve(tmp_path: Path, *extra: str) -> int:
    (tmp_path / "locks").mkdir(exist_ok=True)
    return main(["--pins-file", str(tmp_path / "pins.toml"), "--archives-file", str(tmp_path / "archives.toml"),
                 "--locks-dir", str(tmp_path / "locks"), "--resolve", *extra])  # fmt: skip


def setup_pins(tmp_path: Path, base: str, prefix: str) -> str:
    repo = init_repo(tmp_path / "up")
    sha = commit_files(repo, {"x": "1"})
    (tmp_path / "pins.toml").write_text(f'[up]\nurl = "file://{repo}"\ntrack = "main"\ncommit = "{sha}"\n')
    text = ARCHIVES.format(base=base, prefix=prefix, done="a" * 64)
    (tmp_path / "archives.toml").write_text(text)
    return text


def test_resolve_fills_what_it_reaches_lists_the_rest_and_a_second_run_changes_nothing(tmp_path, served, capsys) -> None:
    base, site = served
    before = setup_pins(tmp_path, base, "llvm-3c709802")
    assert resolve(tmp_path) == 1  # [gone] is not there
    sha = hashlib.sha256((site / "llvm.tar.gz").read_bytes()).hexdigest()
    after = (tmp_path / "archives.toml").read_text()
    assert after == before.replace('sha256 = ""  # filled', f'sha256 = "{sha}"  # filled', 1)  # the rest byte for byte
    out = capsys.readouterr().out
    assert f"llvm: sha256 {sha[:12]} (downloaded {base}/llvm.tar.gz)" in out
    assert f"unresolved: [gone] {base}/gone.tar.gz: 404 Client Error: File not found for url: {base}/gone.tar.gz" in out
    # Once the file is there, the next run takes it, and then there is nothing left to do.
    (site / "gone.tar.gz").write_bytes(tarball("gone"))
    assert resolve(tmp_path) == 0
    resolved = (tmp_path / "archives.toml").read_text()
    assert resolve(tmp_path) == 0
    assert (tmp_path / "archives.toml").read_text() == resolved
    assert capsys.readouterr().out.endswith("every pin is resolved\n")


def test_a_strip_prefix_the_archive_lacks_is_refused(tmp_path, served, capsys) -> None:
    base, _ = served
    before = setup_pins(tmp_path, base, "llvm-0000")
    assert resolve(tmp_path) == 1
    assert (tmp_path / "archives.toml").read_text() == before
    assert (
        f"unresolved: [llvm] {base}/llvm.tar.gz: no member of {base}/llvm.tar.gz is under `strip_prefix` 'llvm-0000' "
        "(its top level: llvm-3c709802)"
    ) in capsys.readouterr().out


BUILD = """\
# The build box.
docker_environment(
    name="build-box",
    image="registry.example:5000/rocm/box:1",  # é: offsets count bytes
    platform="linux_x86_64",
)
docker_environment(name="mini", image="localhost/mini:1", image_recipe="tests/mini/box/build_image.sh")
docker_environment(name="pinned", image="r.example/box:2@sha256:{digest}")
"""


def test_image_pins_are_read_from_and_written_into_the_build_file(tmp_path: Path) -> None:
    text = BUILD.format(digest="b" * 64)
    path = tmp_path / "BUILD"
    envs = image_envs(path, text)
    assert [(e.name, e.tag, e.digest, e.recipe) for e in envs] == [
        ("build-box", "registry.example:5000/rocm/box:1", "", ""),
        ("mini", "localhost/mini:1", "", "tests/mini/box/build_image.sh"),
        ("pinned", "r.example/box:2", "sha256:" + "b" * 64, ""),
    ]
    digest = "sha256:" + "c" * 64
    pinned = pinned_build_file(text, [ImageMove(envs[0], digest, "pulled")])
    assert pinned == text.replace('"registry.example:5000/rocm/box:1"', f'"registry.example:5000/rocm/box:1@{digest}"')
    assert image_envs(path, pinned)[0].digest == digest


def test_a_derived_archive_takes_its_url_from_the_source_tree_and_is_downloaded_once(tmp_path, served, capsys) -> None:
    base, site = served
    repo = init_repo(tmp_path / "up")
    sha = commit_files(repo, {"cmake/llvm-hash.txt": "3c709802" + "e" * 32 + "\n"})
    (tmp_path / "pins.toml").write_text(f'[up]\nurl = "file://{repo}"\ntrack = "main"\ncommit = "{sha}"\n')
    (tmp_path / "archives.toml").write_text(
        '[llvm]\nurl = ""\nsha256 = ""\nstrip_prefix = ""\nderived_from = "up:cmake/llvm-hash.txt"\n'
        f'url_template = "{base}/llvm-{{hash8}}.tar.gz"\nstrip_prefix_template = "llvm-{{hash8}}"\n'
    )
    (site / "llvm-3c709802.tar.gz").write_bytes(tarball("llvm-3c709802"))
    assert resolve(tmp_path) == 0
    text = (tmp_path / "archives.toml").read_text()
    sha256 = hashlib.sha256((site / "llvm-3c709802.tar.gz").read_bytes()).hexdigest()
    assert f'url = "{base}/llvm-3c709802.tar.gz"\nsha256 = "{sha256}"\nstrip_prefix = "llvm-3c709802"\n' in text
    assert f"llvm: sha256 {sha256[:12]} (up:cmake/llvm-hash.txt at up {sha[:12]})" in capsys.readouterr().out
    assert GETS == ["/llvm-3c709802.tar.gz"]
