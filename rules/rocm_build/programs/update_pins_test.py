from __future__ import annotations

import functools
import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest

from rocm_build.testutil.git_fixtures import commit_files, init_repo
from rocm_build.wheel.lockfile import BuildLock, render
from rocm_build.programs.update_pins import main

PATCH = """\
--- a/setup.py
+++ b/setup.py
@@ -1 +1 @@
-ARCHS = ['gfx90a']
+ARCHS = ['gfx90a', 'gfx1151']
"""


@pytest.fixture
def world(tmp_path: Path):
    torch = init_repo(tmp_path / "torch")
    aot = init_repo(tmp_path / "aotriton")
    aot_1 = commit_files(aot, {"x": "1"})
    aot_2 = commit_files(aot, {"x": "2"})
    torch_1 = commit_files(torch, {
        "setup.py": "ARCHS = ['gfx90a']\n",
        "cmake/External/aotriton.cmake": f'  set(__AOTRITON_CI_COMMIT "{aot_1}")\n',
    })  # fmt: skip
    pins = tmp_path / "pins.toml"
    pins.write_text(
        f"# kept\n[torch]\nurl = \"file://{torch}\"\ntrack = \"main\"\ncommit = \"{torch_1}\"  # torch\n\n"
        f"[aotriton]\nurl = \"file://{aot}\"\ntrack = \"main\"\ncommit = \"{aot_1}\"\n"
        'derived_from = "torch:cmake/External/aotriton.cmake"\n'
    )
    (tmp_path / "patches/torch").mkdir(parents=True)
    (tmp_path / "patches/torch/0001-archs.patch").write_text(PATCH)
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
    assert run(tmp_path, pins) == 0
    after = pins.read_text()
    assert after == before.replace(torch_1, torch_2).replace(aot_1, aot_2)
    out = capsys.readouterr().out
    assert f"torch: {torch_1[:12]} -> {torch_2[:12]} (main moved)" in out
    assert f"aotriton: {aot_1[:12]} -> {aot_2[:12]} (torch:cmake/External/aotriton.cmake at torch" in out
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


class FakeGitHub(http.server.BaseHTTPRequestHandler):
    """A local stand-in for api.github.com: answers commits/<ref>, or rate-limits."""

    replies: dict = {}
    seen_auth: list = []

    def do_GET(self) -> None:
        self.seen_auth.append(self.headers.get("Authorization"))
        status, headers, body = self.replies[self.path]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def github():
    server = http.server.HTTPServer(("127.0.0.1", 0), FakeGitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def github_pins(tmp_path: Path) -> Path:
    pins = tmp_path / "gh.toml"
    pins.write_text(f'[vllm]\nurl = "https://github.com/vllm-project/vllm.git"\ntrack = "main"\ncommit = "{"a" * 40}"\n')
    return pins


def test_github_api_with_token(tmp_path, github, monkeypatch, capsys) -> None:
    FakeGitHub.replies = {"/repos/vllm-project/vllm/commits/main": (200, {}, {"sha": "b" * 40})}
    monkeypatch.setenv("GITHUB_TOKEN", "secret-token")
    pins = github_pins(tmp_path)
    assert main(["--pins-file", str(pins), "--github-api", github, "--no-patch-check", "--locks-dir", str(tmp_path)]) == 0
    assert "b" * 40 in pins.read_text()
    assert FakeGitHub.seen_auth[-1] == "Bearer secret-token"
    captured = capsys.readouterr()
    assert "secret-token" not in captured.out + captured.err


def test_github_rate_limit(tmp_path, github, capsys) -> None:
    FakeGitHub.replies = {
        "/repos/vllm-project/vllm/commits/main": (
            403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1790000000"},
            {"message": "API rate limit exceeded"},
        )
    }  # fmt: skip
    pins = github_pins(tmp_path)
    before = pins.read_bytes()
    assert main(["--pins-file", str(pins), "--github-api", github, "--locks-dir", str(tmp_path)]) == 1
    assert pins.read_bytes() == before
    assert "the GitHub API rate limit is exhausted (HTTP 403, resets at epoch 1790000000). Set GITHUB_TOKEN" in capsys.readouterr().err


def test_derived_commit_reads_pytorch_cmake_shapes(tmp_path) -> None:
    from rocm_build.programs.update_pins import derived_commit

    # Recent PyTorch: an environment override first, then the pin, then 64-hex tarball sums.
    (tmp_path / "aotriton.cmake").write_text(
        "  if(DEFINED ENV{PYTORCH_AOTRITON_COMMIT})\n"
        '    set(__AOTRITON_CI_COMMIT "$ENV{PYTORCH_AOTRITON_COMMIT}")\n'
        "  else()\n"
        f'    set(__AOTRITON_CI_COMMIT "{"7" * 40}")\n'
        "  endif()\n"
        f'  set(__AOTRITON_SHA256_LIST "{"e" * 64}")\n'
    )
    assert derived_commit("torch:aotriton.cmake", str(tmp_path), "aotriton") == "7" * 40
    # Older PyTorch: aotriton_version.txt, whose fourth line is the commit.
    (tmp_path / "aotriton_version.txt").write_text(f"0.7b\nmanylinux_2_17\nrocm6.2\n{'9' * 40}\n{'0' * 64}\ngz\n")
    assert derived_commit("torch:aotriton_version.txt", str(tmp_path), "aotriton") == "9" * 40


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


def test_a_release_pin_moves_to_the_newest_final_release_tag_and_records_its_version(tmp_path, capsys) -> None:
    from rocm_build.testutil.git_fixtures import git

    repo = init_repo(tmp_path / "vllm")
    old = commit_files(repo, {"setup.py": "# 0.30.0\n"})
    git(repo, "tag", "v0.30.0")
    v31 = commit_files(repo, {"setup.py": "# 0.31.0\n"})
    git(repo, "tag", "-a", "-m", "release", "v0.31.0")  # annotated: the commit, not the tag object
    commit_files(repo, {"setup.py": "# 0.32.0rc1\n"})
    git(repo, "tag", "v0.32.0rc1")  # a pre-release: not taken
    git(repo, "tag", "nightly")  # not a version
    commit_files(repo, {"setup.py": "# 0.9.0 of something else\n"})
    git(repo, "tag", "other-v0.99.0")  # does not match `tags`
    pins = tmp_path / "pins.toml"
    pins.write_text(f'[vllm]\nurl = "file://{repo}"\ntrack = "release"\ntags = "v*"\ncommit = "{old}"  # kept\n')
    assert run(tmp_path, pins, "--no-patch-check") == 0
    assert pins.read_text() == (
        f'[vllm]\nurl = "file://{repo}"\ntrack = "release"\ntags = "v*"\ncommit = "{v31}"  # kept\nversion = "0.31.0"\n'
    )
    assert f"vllm: {old[:12]} -> {v31[:12]} (newest release 0.31.0 (tags 'v*'))" in capsys.readouterr().out
    assert run(tmp_path, pins, "--check", "--no-patch-check") == 0


def test_a_release_pin_with_no_matching_tag_changes_nothing(tmp_path, capsys) -> None:
    repo = init_repo(tmp_path / "fa")
    old = commit_files(repo, {"setup.py": "\n"})
    pins = tmp_path / "pins.toml"
    text = f'[fa]\nurl = "file://{repo}"\ntrack = "release"\ntags = "v2.8.*"\ncommit = "{old}"\n'
    pins.write_text(text)
    assert run(tmp_path, pins, "--no-patch-check") == 1
    assert pins.read_text() == text
    assert (
        f'update-pins: [fa] `track = "release"`: no tag of file://{repo} matches `tags = "v2.8.*"` and names a final '
        "release (e.g. v1.2.3). Fix `tags`, or track a branch; the pins file was not changed."
    ) in capsys.readouterr().err
