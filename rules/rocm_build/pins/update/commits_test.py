"""update-pins choosing a git pin's new commit (commits.py): the GitHub API, release
tags, and the file a derived pin is read from."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from rocm_build.pins.update.commits import derived_commit
from rocm_build.programs.update_pins import main
from rocm_build.testutil.git_fixtures import commit_files, git, init_repo


def update_pins(tmp_path: Path, pins: Path, *extra: str) -> int:
    (tmp_path / "locks").mkdir(exist_ok=True)
    return main([
        "--pins-file", str(pins), "--locks-dir", str(tmp_path / "locks"), "--archives-file", str(tmp_path / "archives.toml"),
        *extra,
    ])  # fmt: skip


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


def test_a_release_pin_moves_to_the_newest_final_release_tag_and_records_its_version(tmp_path, capsys) -> None:
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
    assert update_pins(tmp_path, pins, "--no-patch-check") == 0
    assert pins.read_text() == (
        f'[vllm]\nurl = "file://{repo}"\ntrack = "release"\ntags = "v*"\ncommit = "{v31}"  # kept\nversion = "0.31.0"\n'
    )
    assert f"vllm: {old[:12]} -> {v31[:12]} (newest release 0.31.0 (tags 'v*'))" in capsys.readouterr().out
    assert update_pins(tmp_path, pins, "--check", "--no-patch-check") == 0


def test_a_release_pin_with_no_matching_tag_changes_nothing(tmp_path, capsys) -> None:
    repo = init_repo(tmp_path / "fa")
    old = commit_files(repo, {"setup.py": "\n"})
    pins = tmp_path / "pins.toml"
    text = f'[fa]\nurl = "file://{repo}"\ntrack = "release"\ntags = "v2.8.*"\ncommit = "{old}"\n'
    pins.write_text(text)
    assert update_pins(tmp_path, pins, "--no-patch-check") == 1
    assert pins.read_text() == text
    assert (
        f'update-pins: [fa] `track = "release"`: no tag of file://{repo} matches `tags = "v2.8.*"` and names a final '
        "release (e.g. v1.2.3). Fix `tags`, or track a branch; the pins file was not changed."
    ) in capsys.readouterr().err
