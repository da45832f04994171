"""scripts/source_pack.py with real git: a commit and its submodules into one pack, and out again."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_build.testutil.git_fixtures import commit_files, commit_gitlink, git, init_repo
from rocm_build.sandbox_scripts import script_bytes


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "source_pack.py"
    path.write_bytes(script_bytes("source_pack.py"))
    (tmp_path / "git_urls.py").write_bytes(script_bytes("git_urls.py"))
    (tmp_path / "mirrors.py").write_bytes(script_bytes("mirrors.py"))
    return path


def run(script: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True)


def add_submodule(repo: Path, url: str, path: str) -> None:
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", url, path)


@pytest.fixture
def with_submodules(tmp_path: Path) -> tuple[Path, str]:
    """top -> third_party/mid (an absolute URL) -> deep (a URL relative to mid's)."""
    deep = init_repo(tmp_path / "deep")
    commit_files(deep, {"deep.c": "int deep;\n"})
    mid = init_repo(tmp_path / "mid")
    commit_files(mid, {"mid.c": "int mid;\n"})
    add_submodule(mid, "../deep", "vendor/deep")
    commit_files(mid, {}, "with deep")
    top = init_repo(tmp_path / "top")
    commit_files(top, {"setup.py": "print('top')\n", "bin/run": "#!/bin/sh\n"})
    (top / "bin/run").chmod(0o755)
    (top / "link").symlink_to("setup.py")
    add_submodule(top, f"file://{mid}", "third_party/mid")
    sha = commit_files(top, {}, "with mid")
    commit_files(top, {"later.txt": "x"}, "after the pin")
    return top, sha


def test_a_commit_and_its_submodules_check_out_as_the_tree(script, with_submodules, tmp_path) -> None:
    top, sha = with_submodules
    fetched = run(script, tmp_path / "f", "fetch", f"file://{top}", sha, "1", "source")
    assert fetched.returncode == 0, fetched.stderr
    out = tmp_path / "f"
    assert sorted(p.name for p in (out / "source").iterdir()) == ["objects.idx", "objects.pack", "repos"]
    repos = (out / "source/repos").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in repos] == [".", "third_party/mid", "third_party/mid/vendor/deep"]
    assert repos[0] == f"{sha} ."
    assert (out / "commit_time").read_text().strip() == "1767225600"  # the fixture's committer date

    assert run(script, out, "checkout", "source", "tree").returncode == 0
    files = sorted(str(p.relative_to(out / "tree")) for p in (out / "tree").rglob("*") if not p.is_dir())
    assert files == [".gitmodules", "bin/run", "link", "setup.py", "third_party/mid/.gitmodules",
                     "third_party/mid/mid.c", "third_party/mid/vendor/deep/deep.c"]  # fmt: skip
    assert (out / "tree/third_party/mid/vendor/deep/deep.c").read_text() == "int deep;\n"
    assert (out / "tree/bin/run").stat().st_mode & 0o111 and (out / "tree/link").readlink() == Path("setup.py")

    only = run(script, out, "checkout", "source", "some", "--only", "setup.py", "third_party", "third_party/mid/mid.c", "nope")
    assert only.returncode == 0, only.stderr
    assert sorted(str(p.relative_to(out / "some")) for p in (out / "some").rglob("*") if not p.is_dir()) == [
        "setup.py", "third_party/mid/mid.c"
    ]
    rest = run(script, out, "checkout", "source", "rest", "--except", "setup.py", "third_party/mid/vendor/deep/deep.c")
    assert rest.returncode == 0, rest.stderr
    assert not (out / "rest/setup.py").exists() and not (out / "rest/third_party/mid/vendor/deep/deep.c").exists()
    assert (out / "rest/third_party/mid/mid.c").exists()
    assert not list(out.glob(".source-git-*"))  # the temporary git directory is gone


def test_the_pack_is_the_same_bytes_from_every_fetch(script, with_submodules, tmp_path) -> None:
    top, sha = with_submodules
    packs = []
    for where in ("a", "b"):
        assert run(script, tmp_path / where, "fetch", f"file://{top}", sha, "1", "source").returncode == 0
        packs.append([(tmp_path / where / "source" / n).read_bytes() for n in ("objects.pack", "objects.idx", "repos")])
    assert packs[0] == packs[1]


def test_the_pack_does_not_depend_on_how_the_server_packed_its_objects(script, tmp_path) -> None:
    # The same commit from two servers, one holding deltas and one loose objects only: the
    # fetch recompresses every object, so the packs are the same bytes.
    repo = init_repo(tmp_path / "upstream")
    sha = commit_files(repo, {f"f{i}.txt": "same line\n" * 200 + f"{i}\n" for i in range(30)})
    for name, repack in (("deltas", ["repack", "-adf", "--window=50"]), ("plain", ["repack", "-adf", "--window=0"])):
        git(tmp_path, "clone", "-q", "--bare", str(repo), name)
        git(tmp_path / name, *repack)
    packs = []
    for name in ("deltas", "plain"):
        assert run(script, tmp_path / f"from-{name}", "fetch", f"file://{tmp_path / name}", sha, "0", "source").returncode == 0
        packs.append((tmp_path / f"from-{name}/source/objects.pack").read_bytes())
    assert packs[0] == packs[1]


def test_without_submodules_the_pack_holds_the_top_tree_only(script, with_submodules, tmp_path) -> None:
    top, sha = with_submodules
    assert run(script, tmp_path, "fetch", f"file://{top}", sha, "0", "source").returncode == 0
    assert (tmp_path / "source/repos").read_text() == f"{sha} .\n"
    assert run(script, tmp_path, "checkout", "source", "tree").returncode == 0
    assert (tmp_path / "tree/third_party/mid").is_dir() and not list((tmp_path / "tree/third_party/mid").iterdir())


def test_failures_exit_with_the_code_that_says_which(script, with_submodules, tmp_path) -> None:
    top, sha = with_submodules
    missing = run(script, tmp_path / "a", "fetch", f"file://{top}", "0" * 40, "0", "source")
    assert missing.returncode == 10 and missing.stderr.strip()
    # A submodule whose repository is gone.
    mid = tmp_path / "mid"
    mid.rename(tmp_path / "mid-moved")
    gone = run(script, tmp_path / "b", "fetch", f"file://{top}", sha, "1", "source")
    assert gone.returncode == 12
    assert f"submodule `third_party/mid`: cannot fetch" in gone.stderr and f"file://{mid}" in gone.stderr


def test_read_follows_symbolic_links_inside_the_tree(script, tmp_path) -> None:
    # As upstreams do: requirements.txt a link to a file, a directory a link to another, a link
    # into a submodule; links that leave the tree or loop name nothing.
    sub = init_repo(tmp_path / "sub")
    commit_files(sub, {"reqs/rocm.txt": "torch\n"})
    top = init_repo(tmp_path / "top")
    commit_files(top, {"requirements/rocm.txt": "numpy\n", "tools/run.sh": "#!/bin/sh\n"})
    (top / "tools/run.sh").chmod(0o755)
    for link, target in {"requirements.txt": "requirements/rocm.txt", "reqs": "requirements", "tools/again": "../reqs",
                         "sub-reqs": "third_party/sub/reqs", "outside": "../../etc/passwd", "absolute": "/etc/passwd",
                         "loop-a": "loop-b", "loop-b": "loop-a", "run": "tools/run.sh"}.items():  # fmt: skip
        (top / link).symlink_to(target)
    add_submodule(top, f"file://{sub}", "third_party/sub")
    sha = commit_files(top, {}, "links")
    assert run(script, tmp_path / "f", "fetch", f"file://{top}", sha, "1", "source").returncode == 0

    asked = ["requirements.txt", "reqs/rocm.txt", "tools/again/rocm.txt", "sub-reqs/rocm.txt", "outside", "absolute",
             "loop-a", "reqs", "nope.txt", "run"]  # fmt: skip
    read = run(script, tmp_path / "f", "checkout", "source", "out", "--read", *asked)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == {
        "requirements.txt": "requirements/rocm.txt",
        "reqs/rocm.txt": "requirements/rocm.txt",
        "tools/again/rocm.txt": "requirements/rocm.txt",
        "sub-reqs/rocm.txt": "third_party/sub/reqs/rocm.txt",
        "run": "tools/run.sh",
    }
    out = tmp_path / "f/out"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() or p.is_symlink()) == [
        "reqs/rocm.txt", "requirements.txt", "run", "sub-reqs/rocm.txt", "tools/again/rocm.txt"
    ]  # fmt: skip
    assert not any(p.is_symlink() for p in out.rglob("*"))  # contents, not links
    assert (out / "tools/again/rocm.txt").read_text() == "numpy\n" and (out / "sub-reqs/rocm.txt").read_text() == "torch\n"
    assert (out / "run").stat().st_mode & 0o111


def test_submodules_marked_update_none_are_left_empty_as_git_does(script, tmp_path) -> None:
    docs = init_repo(tmp_path / "docs")
    commit_files(docs, {"big.bin": "x"})
    top = init_repo(tmp_path / "top")
    add_submodule(top, f"file://{docs}", "docs")
    git(top, "config", "-f", ".gitmodules", "submodule.docs.update", "none")
    sha = commit_files(top, {"setup.py": ""}, "docs not wanted")
    (tmp_path / "docs").rename(tmp_path / "docs-gone")  # not fetched: its absence is no failure
    fetched = run(script, tmp_path / "f", "fetch", f"file://{top}", sha, "1", "source")
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "f/source/repos").read_text() == f"{sha} .\n"


@pytest.mark.parametrize(
    "parent, url, resolved",
    [
        ("https://host/org/top.git", "../dep.git", "https://host/org/dep.git"),
        ("https://host/org/top/", "./vendor/x", "https://host/org/top/vendor/x"),
        ("git@host:org/top", "../dep", "git@host:org/dep"),
        ("git@host:top", "../dep", "git@host:dep"),
        ("/srv/git/top", "../../other/dep", "/srv/other/dep"),
        ("https://host/org/top", "https://elsewhere/dep", "https://elsewhere/dep"),
    ],
)
def test_relative_submodule_urls_resolve_as_git_resolves_them(script, parent, url, resolved) -> None:
    spec = importlib.util.spec_from_file_location("git_urls", script.parent / "git_urls.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.resolve(parent, url) == resolved


@pytest.mark.parametrize(
    "url, why",
    [
        ("--upload-pack=touch ../../pwned;", "starts with `-`, which git would read as an option"),
        ("ext::sh -c touch% ../../pwned", "names the remote helper `ext::`, which runs a program instead of fetching"),
        ("ssh://-oProxyCommand=touch%20pwned/x", "has a host that starts with `-`, which ssh would read as an option"),
        ("http://example.invalid/dep.git", "uses the scheme `http://`, which is not allowed here (unencrypted and unauthenticated)"),
        ("https://user:hunter2@example.invalid/dep.git", "carries a password or token"),
    ],
)
def test_a_hostile_submodule_url_is_refused_before_git_sees_it(script, tmp_path, url, why) -> None:
    top = init_repo(tmp_path / "top")
    commit_files(top, {"setup.py": "\n"})
    sha = commit_gitlink(top, "third_party/evil", url)
    fetched = run(script, tmp_path / "f", "fetch", f"file://{top}", sha, "1", "source")
    assert fetched.returncode == 14, fetched.stderr
    refused = json.loads(fetched.stderr.strip().splitlines()[-1])["refused"]
    assert refused["path"] == "third_party/evil" and why in refused["why"]
    assert "hunter2" not in fetched.stderr
    assert not list(tmp_path.rglob("pwned")) and not (tmp_path / "f/source").exists()


def test_a_file_submodule_is_refused_when_the_pin_is_not_a_file_url(tmp_path) -> None:
    module = importlib.util.module_from_spec(spec := importlib.util.spec_from_file_location("git_urls", tmp_path / "g.py"))
    (tmp_path / "g.py").write_bytes(script_bytes("git_urls.py"))
    spec.loader.exec_module(module)
    for pin, allowed in (("https://host/top.git", False), ("git@host:top", False), ("file:///srv/top", True)):
        why = module.refusal(module.resolve(pin, "file:///etc/secrets"), module.schemes_for(pin))
        assert (why is None) == allowed, (pin, why)
    assert module.refusal(module.resolve("https://host/org/top", "../../../../x"), ("https",)) is None


def test_an_unexpected_git_failure_says_which_command_not_a_traceback(script, with_submodules, tmp_path) -> None:
    top, sha = with_submodules
    assert run(script, tmp_path, "fetch", f"file://{top}", sha, "0", "source").returncode == 0
    (tmp_path / "source/repos").write_text(f"{'1' * 40} .\n")  # a commit the pack does not hold
    broken = run(script, tmp_path, "checkout", "source", "tree")
    assert broken.returncode == 13
    assert "`git read-tree` failed (exit 128)" in broken.stderr and "Traceback" not in broken.stderr


def test_an_https_pin_is_fetched_from_its_mirror_submodules_too_and_checked_by_commit(script, tmp_path) -> None:
    # The upstreams exist only as local copies under a mirror directory: the pin and the
    # submodule's relative URL name https://example.invalid, which nothing serves.
    mirror = tmp_path / "mirror"
    dep = init_repo(mirror / "org/dep")
    commit_files(dep, {"dep.c": "int dep;\n"})
    top = init_repo(mirror / "org/top")
    commit_files(top, {"setup.py": "\n"})
    sha = commit_gitlink(top, "third_party/dep", "../dep", git(dep, "rev-parse", "HEAD"))
    box = tmp_path / "box"
    (box / ".mirrors").mkdir(parents=True)
    table = {"https://example.invalid/": f"file://{mirror}/"}
    (box / ".mirrors/mirrors.json").write_text(json.dumps(table))
    fetched = run(script, box, "fetch", "https://example.invalid/org/top", sha, "1", "source")
    assert fetched.returncode == 0, fetched.stderr
    assert [line.split(" ", 1)[1] for line in (box / "source/repos").read_text().splitlines()] == [".", "third_party/dep"]
    # A mirror serves only what the pin names: a commit it does not have is not taken from it.
    again = tmp_path / "again"
    (again / ".mirrors").mkdir(parents=True)
    (again / ".mirrors/mirrors.json").write_text(json.dumps(table))
    missing = run(script, again, "fetch", "https://example.invalid/org/top", "1" * 40, "0", "source")
    assert missing.returncode == 10
    assert f"(fetched through the mirror file://{mirror}/: file://{mirror}/org/top)" in missing.stderr
    # Without the table, the pin's own URL is used (and here cannot be reached).
    plain = run(script, tmp_path / "plain", "fetch", "https://example.invalid/org/top", sha, "0", "source")
    assert plain.returncode == 10


def test_mirror_tables_are_checked_before_use(tmp_path) -> None:
    (tmp_path / "m.py").write_bytes(script_bytes("mirrors.py"))
    (tmp_path / "git_urls.py").write_bytes(script_bytes("git_urls.py"))
    env = {"PATH": "/usr/bin:/bin", "ROCM_BUILD_MIRRORS": json.dumps({"https://github.com/": "ext::sh -c x/"})}
    cache = tmp_path / "cache"
    cache.mkdir()
    bad = subprocess.run([sys.executable, str(tmp_path / "m.py"), "configure", str(cache)], env=env, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "the mirror 'ext::sh -c x/' (for 'https://github.com/') names the remote helper `ext::`" in bad.stderr
    assert not list(cache.iterdir())
    env["ROCM_BUILD_MIRRORS"] = json.dumps({"https://github.com/": "file:///srv/github/"})
    good = subprocess.run([sys.executable, str(tmp_path / "m.py"), "configure", str(cache)], env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert json.loads((cache / "mirrors.json").read_text()) == {"https://github.com/": "file:///srv/github/"}


def unpacked_archive(root: Path) -> Path:
    """An unpacked sdist: an executable, a link, and a file its own .gitignore names."""
    tree = root / "archive"
    (tree / "pkg").mkdir(parents=True)
    (tree / "setup.py").write_text("print('sdist')\n")
    (tree / "pkg/__init__.py").write_text("VERSION = '1.0'\n")
    (tree / "pkg/tool").write_text("#!/bin/sh\n")
    (tree / "pkg/tool").chmod(0o755)
    (tree / "link").symlink_to("setup.py")
    (tree / ".gitignore").write_text("*.egg-info\n")
    (tree / "pkg.egg-info").mkdir()
    (tree / "pkg.egg-info/PKG-INFO").write_text("Name: pkg\n")
    return tree


def test_an_unpacked_archive_packs_as_one_commit_the_same_anywhere(script, tmp_path) -> None:
    packs = []
    for where in ("a", "b"):
        unpacked_archive(tmp_path / where)
        packed = run(script, tmp_path / where, "pack", "archive", "1760000000", "source")
        assert packed.returncode == 0, packed.stderr
        packs.append(tmp_path / where)
    a, b = packs
    assert (a / "source/repos").read_text() == (b / "source/repos").read_text()
    assert (a / "source/objects.pack").read_bytes() == (b / "source/objects.pack").read_bytes()
    assert (a / "commit_time").read_text().strip() == "1760000000"
    commit = (a / "source/repos").read_text().split()[0]
    # The commit's SHA is its content's: the files, the fixed author and the archive's date.
    git_dir = tmp_path / "inspect.git"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    for ext in ("pack", "idx"):
        (git_dir / f"objects/pack/pack-x.{ext}").write_bytes((a / f"source/objects.{ext}").read_bytes())
    shown = subprocess.run(["git", "--git-dir", str(git_dir), "show", "-s", "--format=%an %ct %s", commit],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "rocm-build 1760000000 the unpacked archive"
    # Checked out, it is the archive again: the ignored file too, modes and links as they were.
    out = run(script, tmp_path / "c", "checkout", str(a / "source"), "tree")
    assert out.returncode == 0, out.stderr
    tree = tmp_path / "c/tree"
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == [
        ".gitignore", "link", "pkg", "pkg.egg-info", "pkg.egg-info/PKG-INFO", "pkg/__init__.py", "pkg/tool", "setup.py",
    ]  # fmt: skip
    assert (tree / "pkg/tool").stat().st_mode & 0o111 and not (tree / "setup.py").stat().st_mode & 0o111
    assert (tree / "link").is_symlink() and str((tree / "link").readlink()) == "setup.py"


def test_another_date_is_another_commit_of_the_same_files(script, tmp_path) -> None:
    commits = []
    for where, epoch in (("a", "1760000000"), ("b", "1760000001")):
        unpacked_archive(tmp_path / where)
        assert run(script, tmp_path / where, "pack", "archive", epoch, "source").returncode == 0
        commits.append((tmp_path / where / "source/repos").read_text())
    assert commits[0] != commits[1]
