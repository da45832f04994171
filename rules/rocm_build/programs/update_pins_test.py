from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from rocm_build.testutil.git_fixtures import ARCHS_PATCH, ARCHS_SETUP, commit_files, init_repo
from rocm_build.locks.lockfile import BuildLock, render
from rocm_build.programs.update_pins import main


@pytest.fixture
def world(tmp_path: Path):
    torch = init_repo(tmp_path / "torch")
    aot = init_repo(tmp_path / "aotriton")
    aot_1 = commit_files(aot, {"x": "1"})
    aot_2 = commit_files(aot, {"x": "2"})
    torch_1 = commit_files(torch, {
        "setup.py": ARCHS_SETUP,
        "cmake/External/aotriton.cmake": f'  set(__AOTRITON_CI_COMMIT "{aot_1}")\n',
    })  # fmt: skip
    pins = tmp_path / "pins.toml"
    pins.write_text(
        f"# kept\n[torch]\nurl = \"file://{torch}\"\ntrack = \"main\"\ncommit = \"{torch_1}\"  # torch\n\n"
        f"[aotriton]\nurl = \"file://{aot}\"\ntrack = \"main\"\ncommit = \"{aot_1}\"\n"
        'derived_from = "torch:cmake/External/aotriton.cmake"\n'
    )
    (tmp_path / "patches/torch").mkdir(parents=True)
    (tmp_path / "patches/torch/0001-archs.patch").write_text(ARCHS_PATCH)
    return tmp_path, torch, aot, pins, (torch_1, aot_1, aot_2)


def run(tmp_path: Path, pins: Path, *extra: str) -> int:
    (tmp_path / "locks").mkdir(exist_ok=True)
    return main(
        [
            "--pins-file", str(pins), "--patches-dir", str(tmp_path / "patches"), "--locks-dir", str(tmp_path / "locks"),
            "--archives-file", str(tmp_path / "archives.toml"), *extra,
        ]
    )  # fmt: skip


ARCHIVES = """\
# kept
[torch-llvm]
url = ""
sha256 = ""  # filled by update-pins
strip_prefix = ""
derived_from = "torch:cmake/llvm-hash.txt"
url_template = "{base}/llvm-{{hash8}}-ubuntu-x64.tar.gz"
strip_prefix_template = "llvm-{{hash8}}-ubuntu-x64"
"""


def test_derived_archive_follows_its_source_pin_and_gets_its_sha256(world, tmp_path, capsys) -> None:
    _, torch, _, pins, _ = world
    llvm = "3c709802" + "d" * 32
    commit_files(torch, {"cmake/llvm-hash.txt": llvm + "\n"})
    served = tmp_path / "served"
    served.mkdir()
    (served / "llvm-3c709802-ubuntu-x64.tar.gz").write_bytes(b"an llvm build")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    archives = tmp_path / "archives.toml"
    archives.write_text(ARCHIVES.format(base=base))
    try:
        assert run(tmp_path, pins, "--only", "torch", "--no-patch-check") == 0
    finally:
        server.shutdown()
    text = archives.read_text()
    assert f'url = "{base}/llvm-3c709802-ubuntu-x64.tar.gz"\n' in text
    assert f'sha256 = "{hashlib.sha256(b"an llvm build").hexdigest()}"  # filled by update-pins\n' in text
    assert 'strip_prefix = "llvm-3c709802-ubuntu-x64"\n' in text and text.startswith("# kept\n")
    assert "torch-llvm: " in capsys.readouterr().out
    assert run(tmp_path, pins, "--check", "--only", "torch", "--no-patch-check") == 0  # now current


def test_derived_archive_that_cannot_be_downloaded_stays_unresolved(world, tmp_path, capsys) -> None:
    _, torch, _, pins, _ = world
    commit_files(torch, {"cmake/llvm-hash.txt": "3c709802" + "d" * 32 + "\n"})
    archives = tmp_path / "archives.toml"
    archives.write_text(ARCHIVES.format(base="http://127.0.0.1:9"))
    assert run(tmp_path, pins, "--only", "torch", "--no-patch-check") == 0
    assert 'url = "http://127.0.0.1:9/llvm-3c709802-ubuntu-x64.tar.gz"' in archives.read_text()
    assert 'sha256 = ""  # filled by update-pins' in archives.read_text()
    assert "UNRESOLVED, http://127.0.0.1:9/llvm-3c709802-ubuntu-x64.tar.gz could not be downloaded" in capsys.readouterr().out


def test_check_reports_locks_of_moving_pins(world, capsys) -> None:
    tmp_path, torch, _, pins, (torch_1, _, _) = world
    (tmp_path / "locks").mkdir()
    lock = BuildLock("torch", torch_1, "3.11", ("ninja",), (), (), regenerate="pants lock-build-requirements components/torch:wheel")
    (tmp_path / "locks/torch.lock").write_text(render(lock))
    assert run(tmp_path, pins, "--check", "--only", "torch") == 0  # nothing moved: the lock is current
    torch_2 = commit_files(torch, {"other": "x"})
    assert run(tmp_path, pins, "--check", "--only", "torch") == 1
    out = capsys.readouterr().out
    assert (
        f"{tmp_path}/locks/torch.lock: made at torch {torch_1[:12]}, stale; regenerate: "
        "pants lock-build-requirements components/torch:wheel"
    ) in out
    # Moved without refreshing: the pin moves, and --check keeps reporting the lock.
    assert run(tmp_path, pins, "--only", "torch", "--no-lock-refresh") == 0
    assert torch_2 in pins.read_text()
    assert run(tmp_path, pins, "--check", "--only", "torch") == 1


def test_moves_tracked_and_derived_pins_keeping_comments(world, capsys) -> None:
    tmp_path, torch, aot, pins, (torch_1, aot_1, aot_2) = world
    torch_2 = commit_files(torch, {"cmake/External/aotriton.cmake": f'set(__AOTRITON_CI_COMMIT "{aot_2}")\n'})
    before = pins.read_text()
    assert run(tmp_path, pins, "--check") == 1
    assert pins.read_text() == before
    capsys.readouterr()
    assert run(tmp_path, pins) == 0
    after = pins.read_text()
    assert after == before.replace(torch_1, torch_2).replace(aot_1, aot_2)
    out, err = capsys.readouterr()
    assert f"torch: {torch_1[:12]} -> {torch_2[:12]} (main moved)" in out
    assert f"aotriton: {aot_1[:12]} -> {aot_2[:12]} (torch:cmake/External/aotriton.cmake at torch" in out
    # torch's patches were checked at its new commit; aotriton has no patches/aotriton/: said, not skipped.
    assert f"no patches checked for aotriton: no {tmp_path / 'patches'}/<pin>/ with patches; a patch set elsewhere" in err, err
    assert "torch" not in err.split("no patches checked for ")[1].split(":")[0]
    assert run(tmp_path, pins, "--check") == 0


def test_dry_run_prints_diff_and_changes_nothing(world, capsys) -> None:
    tmp_path, torch, _, pins, (torch_1, _, _) = world
    torch_2 = commit_files(torch, {"other": "x"})
    before = pins.read_text()
    assert run(tmp_path, pins, "--dry-run", "--only", "torch") == 0
    assert pins.read_text() == before
    out = capsys.readouterr().out
    assert f'-commit = "{torch_1}"  # torch' in out and f'+commit = "{torch_2}"  # torch' in out


def test_patch_failure_keeps_pin_unless_forced(world, capsys) -> None:
    tmp_path, torch, _, pins, _ = world
    torch_2 = commit_files(torch, {"setup.py": "ARCHS = ['gfx942']\n"})
    before = pins.read_text()
    assert run(tmp_path, pins, "--only", "torch") == 1
    assert pins.read_text() == before
    err = capsys.readouterr().err
    assert f"[torch] patches do not apply to {torch_2}" in err
    assert "0001-archs.patch: the hunk at setup.py line 1 does not match" in err
    assert run(tmp_path, pins, "--only", "torch", "--force") == 0
    assert torch_2 in pins.read_text()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t.replace('track = "main"', 'track = "nope"', 1),
         '[torch] `track = "nope"` is neither a branch nor a tag'),
        (lambda t: t.replace("/torch", "/missing", 1), "[torch] cannot reach file://"),
    ],
)  # fmt: skip
def test_failures_leave_pins_byte_identical(world, capsys, mutate, message) -> None:
    tmp_path, torch, _, pins, _ = world
    commit_files(torch, {"other": "x"})
    pins.write_text(mutate(pins.read_text()))
    before = pins.read_bytes()
    assert run(tmp_path, pins) == 1
    assert pins.read_bytes() == before
    assert message in capsys.readouterr().err


def test_derived_pin_follows_the_file_its_file_names(world, capsys) -> None:
    tmp_path, torch, aot, pins, (torch_1, aot_1, _) = world
    aot_3 = commit_files(aot, {"x": "3"})
    # PyTorch's second shape: aotriton.cmake reads the commit from aotriton_version.txt.
    commit_files(torch, {
        "cmake/External/aotriton.cmake":
            'file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../../.ci/docker/aotriton_version.txt" __AOTRITON_CI_INFO)\n'
            "list(GET __AOTRITON_CI_INFO 3 __AOTRITON_CI_COMMIT)\n",
        ".ci/docker/aotriton_version.txt": f"0.7b\nmanylinux_2_28\nrocm6.3\n{aot_3}\n{'0' * 64}\n",
    })  # fmt: skip
    assert run(tmp_path, pins, "--no-patch-check") == 0
    assert f'commit = "{aot_3}"' in pins.read_text()
    assert (
        f"aotriton: {aot_1[:12]} -> {aot_3[:12]} (torch:cmake/External/aotriton.cmake at torch"
    ) in (out := capsys.readouterr().out)
    assert "names it, read from .ci/docker/aotriton_version.txt, which it names)" in out


def test_a_new_pin_gets_its_commit_from_url_and_track(world, tmp_path, capsys) -> None:
    # As "Adding a component" says: a pin with url and track only; update-pins fills `commit`.
    _, _, _, pins, _ = world
    vision = init_repo(tmp_path / "vision")
    sha = commit_files(vision, {"setup.py": "x = 1\n"})
    new_pin = tmp_path / "vision.toml"
    new_pin.write_text(f'# a new component\n[vision]\nurl = "file://{vision}"\ntrack = "main"\n')
    assert run(tmp_path, new_pin, "--only", "vision") == 0
    assert new_pin.read_text() == f'# a new component\n[vision]\nurl = "file://{vision}"\ntrack = "main"\ncommit = "{sha}"\n'
    assert f"vision: (no commit yet) -> {sha[:12]} (new pin, main is there)" in capsys.readouterr().out
    assert run(tmp_path, new_pin, "--check") == 0
