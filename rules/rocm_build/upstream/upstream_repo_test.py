from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from pants.core.goals.package import BuiltPackage
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents, DigestEntries, FileEntry, RemovePrefix
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.rules import rule
from pants.testutil.rule_runner import QueryRule, RuleRunner

from rocm_build.testutil.git_fixtures import commit_files, init_repo, pins_toml
from rocm_build.testutil.isolated_rule_runner import isolated_rule_runner
from rocm_build.upstream.patching import with_parents
from rocm_build.upstream.source_tree import MergedTree, MergedTreeRequest, SourceTree, source_files
from rocm_build.upstream import upstream_repo
from rocm_build.upstream.target_types import PatchSetTarget, UpstreamArchiveTarget, UpstreamRepoTarget
from rocm_build.upstream.upstream_repo import ResolvedUpstream, UpstreamRepoFieldSet, UpstreamRequest

SETUP = "print('hello')\nARCHS = ['gfx90a']\n"
PATCH = """\
--- a/setup.py
+++ b/setup.py
@@ -1,2 +1,2 @@
 print('hello')
-ARCHS = ['gfx90a']
+ARCHS = ['gfx90a', 'gfx1151']
"""
EDIT = """\
[[edit]]
path = "setup.py"
pattern = "^print\\\\('hello'\\\\)$"
replace = "print('hello gfx1151')"
count = 1
"""


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str]:
    repo = init_repo(tmp_path / "upstream")
    first = commit_files(repo, {"setup.py": SETUP, "pkg/__init__.py": ""}, "first")
    commit_files(repo, {"later.txt": "x"}, "second")  # the pin is not the branch tip
    return repo, first


@dataclass(frozen=True)
class ReadFiles:
    source: SourceTree
    paths: tuple[str, ...]


@dataclass(frozen=True)
class FilesRead:
    contents: tuple[tuple[str, object], ...]


@rule
async def read_files(request: ReadFiles) -> FilesRead:  # source_files is a helper: a rule to call it
    return FilesRead(tuple((await source_files(request.source, request.paths, "test")).items()))


@pytest.fixture
def rule_runner() -> RuleRunner:
    return isolated_rule_runner(
        rules=[
            *upstream_repo.rules(),
            QueryRule(ResolvedUpstream, [UpstreamRequest]),
            QueryRule(MergedTree, [MergedTreeRequest]),
            QueryRule(BuiltPackage, [UpstreamRepoFieldSet]),
            QueryRule(DigestContents, [RemovePrefix]),
            QueryRule(DigestEntries, [Digest]),
            QueryRule(DigestContents, [Digest]),
            read_files,
            QueryRule(FilesRead, [ReadFiles]),
        ],
        target_types=[UpstreamRepoTarget, UpstreamArchiveTarget, PatchSetTarget],
    )


def setup_files(rule_runner: RuleRunner, repo: Path, commit: str, patches: dict[str, str]) -> None:
    rule_runner.write_files(
        {
            "components/pins/all.toml": pins_toml(mini={"url": f"file://{repo}", "track": "main", "commit": commit}),
            "components/mini/BUILD": "upstream_repo(name='src', pin='mini', patches=['patches/mini:gfx1151'])",
            "patches/mini/BUILD": "patch_set(name='gfx1151')",
            **{f"patches/mini/{name}": text for name, text in patches.items()},
        }
    )


def resolve(rule_runner: RuleRunner) -> tuple[ResolvedUpstream, dict[str, bytes]]:
    up = rule_runner.request(
        ResolvedUpstream, [UpstreamRequest(Address("components/mini", target_name="src"), "test")]
    )
    files = rule_runner.request(DigestContents, [RemovePrefix(merged(rule_runner, up), "tree")])
    return up, {fc.path: fc.content for fc in files}


def merged(rule_runner: RuleRunner, up: ResolvedUpstream) -> Digest:
    return rule_runner.request(MergedTree, [MergedTreeRequest(up.source, "test")]).digest


def test_fetches_exact_commit_and_applies_patches_in_order(rule_runner, upstream) -> None:
    repo, first = upstream
    setup_files(rule_runner, repo, first, {"0001-archs.patch": PATCH, "0002-hello.edit.toml": EDIT})
    up, files = resolve(rule_runner)
    assert sorted(files) == ["pkg/__init__.py", "setup.py"]  # no later.txt, no .git
    assert files["setup.py"] == b"print('hello gfx1151')\nARCHS = ['gfx90a', 'gfx1151']\n"
    assert [p.path for p in up.patches] == [
        "patches/mini/0001-archs.patch",
        "patches/mini/0002-hello.edit.toml",
    ]
    assert "applied patches/mini/0001-archs.patch" in up.patch_log


def test_already_applied_patch_is_skipped(rule_runner, upstream) -> None:
    repo, _ = upstream
    patched = commit_files(repo, {"setup.py": SETUP.replace("['gfx90a']", "['gfx90a', 'gfx1151']")})
    setup_files(rule_runner, repo, patched, {"0001-archs.patch": PATCH})
    up, files = resolve(rule_runner)
    assert b"gfx1151" in files["setup.py"]
    assert "already applied, skipped patches/mini/0001-archs.patch" in up.patch_log


def test_edit_with_applied_marker_is_idempotent(rule_runner, upstream) -> None:
    # The pattern still matches after the edit: only `applied` can tell it is in.
    repo, _ = upstream
    edit = (
        '[[edit]]\npath = "setup.py"\npattern = "(ARCHS = \\\\[\'gfx90a\',)"\n'
        'replace = "\\\\1 \'gfx1151\',"\napplied = "gfx1151"\n'
    )
    already = commit_files(repo, {"setup.py": "ARCHS = ['gfx90a', 'gfx1151', 'gfx942']\n"})
    setup_files(rule_runner, repo, already, {"0001-archs.edit.toml": edit})
    up, files = resolve(rule_runner)
    assert files["setup.py"] == b"ARCHS = ['gfx90a', 'gfx1151', 'gfx942']\n"
    assert "already applied, skipped patches/mini/0001-archs.edit.toml edit 1" in up.patch_log
    fresh = commit_files(repo, {"setup.py": "ARCHS = ['gfx90a', 'gfx942']\n"})
    setup_files(rule_runner, repo, fresh, {"0001-archs.edit.toml": edit})
    _, files = resolve(rule_runner)
    assert files["setup.py"] == b"ARCHS = ['gfx90a', 'gfx1151', 'gfx942']\n"


RESHAPE = """\
diff --git a/docs/old.md b/docs/new.md
similarity index 100%
rename from docs/old.md
rename to docs/new.md
diff --git a/pkg/sub/b.py b/pkg/sub/b.py
--- a/pkg/sub/b.py
+++ b/pkg/sub/b.py
@@ -1 +1 @@
-B = 1
+B = 2
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/new/dir/c.py b/new/dir/c.py
new file mode 100755
--- /dev/null
+++ b/new/dir/c.py
@@ -0,0 +1 @@
+C = 3
"""


def test_patched_files_are_merged_back_over_the_untouched_tree(rule_runner, upstream) -> None:
    # The patch process sees only the touched files; renames, deletions, new files and modes
    # must come out as if the whole tree had been patched, every other file unchanged.
    repo, _ = upstream
    untouched = {f"third_party/lib{i}/f{j}.c": f"int f{i}_{j};\n" for i in range(20) for j in range(10)}
    sha = commit_files(repo, {**untouched, "docs/old.md": "doc\n", "pkg/sub/b.py": "B = 1\n", "gone.txt": "bye\n"})
    setup_files(rule_runner, repo, sha, {"0001-reshape.patch": RESHAPE, "0002-hello.edit.toml": EDIT})
    up, files = resolve(rule_runner)
    assert sorted(files) == sorted(
        ["setup.py", "pkg/__init__.py", "later.txt", "docs/new.md", "pkg/sub/b.py", "new/dir/c.py", *untouched]
    )
    assert {p: files[p] for p in untouched} == {p: t.encode() for p, t in untouched.items()}
    assert (files["docs/new.md"], files["pkg/sub/b.py"], files["new/dir/c.py"]) == (b"doc\n", b"B = 2\n", b"C = 3\n")
    assert files["setup.py"].startswith(b"print('hello gfx1151')")
    modes = {e.path: e.is_executable for e in rule_runner.request(DigestEntries, [merged(rule_runner, up)]) if isinstance(e, FileEntry)}
    assert modes["tree/new/dir/c.py"] and not modes["tree/pkg/sub/b.py"]
    # A file deleted and one renamed away: the tree cannot be a lower layer with changes on top.
    assert up.source.removes_files
    assert up.source.touched == ("docs/new.md", "docs/old.md", "gone.txt", "new/dir/c.py", "pkg/sub/b.py", "setup.py")


def test_the_patched_tree_is_the_fetched_pack_with_the_patched_files_over_it(rule_runner, upstream) -> None:
    repo, first = upstream
    new_file = "--- /dev/null\n+++ b/new/c.py\n@@ -0,0 +1 @@\n+C = 3\n"
    setup_files(rule_runner, repo, first, {"0001-archs.patch": PATCH, "0002-new.patch": new_file})
    up, files = resolve(rule_runner)
    assert not up.source.removes_files and up.source.touched == ("new/c.py", "setup.py")
    contents = lambda d: {fc.path: fc.content for fc in rule_runner.request(DigestContents, [d])}  # noqa: E731
    assert contents(up.source.changes) == {"tree/setup.py": files["setup.py"], "tree/new/c.py": b"C = 3\n"}
    # The pack: one file for the whole tree, whatever its size, and the commit it holds.
    pack = contents(up.source.pack)
    assert sorted(pack) == ["source/objects.idx", "source/objects.pack", "source/repos"]
    assert pack["source/repos"] == f"{first} .\n".encode()


def test_the_patch_step_gets_the_touched_paths_and_their_parents() -> None:
    # A symbolic link among the parents is checked out with the file, so the patch script sees it.
    assert with_parents(["b/c/d.py", "a.txt"]) == ("a.txt", "b", "b/c", "b/c/d.py")


def test_files_read_for_the_preflight_follow_links_to_the_patched_files(rule_runner, upstream) -> None:
    # vLLM-like: requirements.txt a link to a file a patch changes, and a link through a
    # directory link; what the preflight and the lock read is what the build would read.
    repo, _ = upstream
    (repo / "requirements").mkdir()
    (repo / "requirements/rocm.txt").write_text("numpy\n")
    (repo / "requirements.txt").symlink_to("requirements/rocm.txt")
    (repo / "reqs").symlink_to("requirements")
    sha = commit_files(repo, {"requirements/common.txt": "six\n"}, "links")
    change = "--- a/requirements/rocm.txt\n+++ b/requirements/rocm.txt\n@@ -1 +1 @@\n-numpy\n+numpy<2\n"
    setup_files(rule_runner, repo, sha, {"0001-numpy.patch": change})
    up, _ = resolve(rule_runner)
    asked = ("requirements.txt", "reqs/common.txt", "reqs/rocm.txt", "requirements/rocm.txt", "missing.txt", "reqs")
    read = dict(rule_runner.request(FilesRead, [ReadFiles(up.source, asked)]).contents)
    assert read == {
        "requirements.txt": b"numpy<2\n",
        "reqs/common.txt": b"six\n",
        "reqs/rocm.txt": b"numpy<2\n",
        "requirements/rocm.txt": b"numpy<2\n",
        "missing.txt": None,
        "reqs": None,  # a directory
    }


def test_package_writes_tarball(rule_runner, upstream) -> None:
    repo, first = upstream
    setup_files(rule_runner, repo, first, {"0001-archs.patch": PATCH})
    tgt = rule_runner.get_target(Address("components/mini", target_name="src"))
    built = rule_runner.request(BuiltPackage, [UpstreamRepoFieldSet.create(tgt)])
    name = f"components.mini/mini-{first[:12]}-patched.tar.gz"
    assert built.artifacts[0].relpath == name
    (content,) = rule_runner.request(DigestContents, [built.digest])
    with tarfile.open(fileobj=io.BytesIO(content.content)) as tar:
        setup = tar.extractfile(f"mini-{first[:12]}-patched/setup.py").read()
    assert b"gfx1151" in setup


def error_of(rule_runner: RuleRunner) -> str:
    with pytest.raises(ExecutionError) as e:
        resolve(rule_runner)
    return str(e.value)


def test_commit_not_upstream(rule_runner, upstream) -> None:
    repo, _ = upstream
    missing = "1" * 40
    setup_files(rule_runner, repo, missing, {})
    msg = error_of(rule_runner)
    assert (
        f"components/mini:src: pin `mini` in components/pins: commit {missing} was not "
        f"found at file://{repo}" in msg
    )
    assert "rules:update-pins -- --only mini" in msg


def test_unreachable_url(rule_runner, upstream, tmp_path) -> None:
    setup_files(rule_runner, tmp_path / "nowhere", upstream[1], {})
    msg = error_of(rule_runner)
    assert f"pin `mini` in components/pins: cannot fetch from file://{tmp_path}/nowhere" in msg


def test_patch_that_does_not_apply_names_file_and_hunk(rule_runner, upstream, caplog) -> None:
    repo, first = upstream
    setup_files(rule_runner, repo, first, {"0001-archs.patch": PATCH.replace("gfx90a']\n+", "gfx942']\n+")})
    with pytest.raises(ExecutionError) as e:
        resolve(rule_runner)
    (error,) = e.value.wrapped_exceptions
    # Said once, in the error Pants prints (no log line of it too), what failed and the fix first.
    explanation, said, git_said = str(error).partition("\ngit apply said:\n")
    assert explanation == (
        "components/mini:src: patches/mini/0001-archs.patch: the hunk at setup.py line 1 does not match the pinned "
        "source. No patch before it changes setup.py: the pinned file changed there (or this patch did); refresh the "
        "patch against the pinned commit (or use an anchored edit, *.edit.toml).\n"
        "Fix it in a patch workspace: `./pants patch-workspace components/mini:src` checks out the pinned tree with "
        "the patches before it as git commits; redo the patch there, commit it with its header, then `./pants "
        "patch-workspace --save components/mini:src` (and remove the old file)."
    )
    assert git_said.startswith("Checking patch setup.py...\nerror: while searching for:"), git_said
    assert [r.getMessage() for r in caplog.records if "does not match" in r.getMessage()] == []


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("0001-empty.patch", "\n", "patches/mini/0001-empty.patch: the patch file is empty"),
        (
            "0001-escape.patch",
            PATCH.replace("a/setup.py", "a/../setup.py").replace("b/setup.py", "b/../setup.py"),
            "patches/mini/0001-escape.patch, line 1: touches `../setup.py`, which is outside the source tree",
        ),
        (  # each hostile patch: apply_patches_test.py; here, that the rule passes the refusal on
            "0001-hook.patch",
            PATCH.replace("setup.py", ".git/hooks/post-checkout"),
            "components/mini:src: patches/mini/0001-hook.patch, line 1: touches `.git/hooks/post-checkout`, inside a `.git` directory",
        ),
        (
            "0001-zero.edit.toml",
            EDIT.replace("hello", "bye"),
            "patches/mini/0001-zero.edit.toml: edit 1 on setup.py: pattern \"^print\\\\('bye'\\\\)$\" matched 0 time(s), expected exactly 1",
        ),
        (
            "0001-two.edit.toml",
            '[[edit]]\npath = "setup.py"\npattern = "hello|ARCHS"\nreplace = "x"\n',
            "patches/mini/0001-two.edit.toml: edit 1 on setup.py: pattern 'hello|ARCHS' matched 2 time(s), expected exactly 1",
        ),
    ],
)
def test_bad_patches(rule_runner, upstream, name, text, expected) -> None:
    repo, first = upstream
    setup_files(rule_runner, repo, first, {name: text})
    assert expected in error_of(rule_runner)


def sdist(path: Path, mtimes: dict[str, int]) -> str:
    """A release sdist of the same files as the upstream's first commit; returns its sha256."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in {"setup.py": SETUP, "pkg/__init__.py": "", "PKG-INFO": "Name: mini\nVersion: 1.0\n"}.items():
            info = tarfile.TarInfo(f"mini-1.0/{name}")
            info.size, info.mtime = len(text), mtimes.get(name, 0)
            tf.addfile(info, io.BytesIO(text.encode()))
    path.write_bytes(buf.getvalue())
    return hashlib.sha256(buf.getvalue()).hexdigest()


def test_an_upstream_archive_is_a_source_patched_like_a_repository(rule_runner, tmp_path) -> None:
    sha256 = sdist(tmp_path / "mini-1.0.tar.gz", {"setup.py": 1760000000, "PKG-INFO": 1760000900})
    rule_runner.write_files(
        {
            "components/mini/BUILD": (
                f"upstream_archive(name='sdist', url='file://{tmp_path}/mini-1.0.tar.gz', sha256='{sha256}', "
                "strip_prefix='mini-1.0', patches=['patches/mini:gfx1151'])"
            ),
            "patches/mini/BUILD": "patch_set(name='gfx1151')",
            "patches/mini/0001-archs.patch": PATCH,
            "patches/mini/0002-hello.edit.toml": EDIT,
        }
    )
    sdist_address = Address("components/mini", target_name="sdist")
    up = rule_runner.request(ResolvedUpstream, [UpstreamRequest(sdist_address, "test")])
    files = {fc.path: fc.content for fc in rule_runner.request(DigestContents, [RemovePrefix(merged(rule_runner, up), "tree")])}
    # The same patches as on the repository, applied the same way, to the archive's files.
    assert files == {
        "PKG-INFO": b"Name: mini\nVersion: 1.0\n",
        "pkg/__init__.py": b"",
        "setup.py": b"print('hello gfx1151')\nARCHS = ['gfx90a', 'gfx1151']\n",
    }
    # Named by what it is: its URL and sha256 (no commit); dated by its newest member.
    assert (up.pin.url, up.pin.commit, up.pin_name) == (f"file://{tmp_path}/mini-1.0.tar.gz", sha256, "sdist")
    assert up.commit_time == 1760000900
    assert [p.path for p in up.patches] == ["patches/mini/0001-archs.patch", "patches/mini/0002-hello.edit.toml"]
