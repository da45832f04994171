"""The patch loop a user runs every day, on the miniature chain with pantsd: edit a patch of
ours, `package`, reinstall the set in the same venv with its own command, run the new code.

`package` builds the patched wheel once (Pants starts its build once, after the chain's
checks), says what it built and what it reused, names only the folders of dist/ that changed
(the reused wheels' bytes as they were), and gives the patched wheel a new version, so the
set's own `pip install` takes it. Its package is the whole chain whatever dist/ holds: an
`archive` of it, packaged when dist/ is current, holds every wheel.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Dict

from e2e.install_set import CLEAN_ENV, install_into_fresh_venv, run_in_set
from e2e.workspace import Workspace, make_fixture_upstreams, require_success

VLLM = "tests/mini/vllm:wheel"
PATCH = "tests/mini/patches/vllm/0001-report-gfx1151.patch"
INSTALL = "dist/tests.mini.vllm.install"
SHOW = "import mini_vllm; print(mini_vllm.PATCHED_FOR)"


def dist_files(ws: Workspace) -> Dict[str, str]:
    """Every file in dist/ -> its sha256."""
    return {p.relative_to(ws.root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in ws.path("dist").rglob("*") if p.is_file()}


def summary(stderr: str) -> str:
    """`package`'s summary of the chain: from its first line to the install set's."""
    found = re.search(rf"^.*{re.escape(VLLM)}: \d+ wheel\(s\) in its chain: .*?^  install set .*$", stderr, re.M | re.S)
    assert found, stderr[-4000:]
    return found.group(0)


def test_a_patch_edit_builds_once_says_so_and_installs_over_the_old_set(tmp_path: Path) -> None:
    upstreams = make_fixture_upstreams(tmp_path / "upstreams")
    ws = Workspace(tmp_path / "checkout", upstreams, tmp_path / "store", tmp_path / "named")
    # Every run at -ldebug: another log level would start another pantsd, with nothing in memory.
    package = lambda what: require_success(ws.pants("-ldebug", "package", VLLM), what)  # noqa: E731
    try:
        first = package("the first build")
        assert "in its chain: 4 built, 2 prebuilt, new in dist/" in summary(first.stderr)
        venv = tmp_path / "venv"
        install_into_fresh_venv(ws.path(INSTALL), venv)
        shown = run_in_set(ws.path(INSTALL), venv, SHOW)
        assert (shown.returncode, shown.stdout) == (0, "gfx1151\n"), shown.stderr
        old_version = next(ws.path("dist/tests.mini.vllm").glob("*.whl")).name.split("-")[1]
        assert re.fullmatch(r"1\.0\.0\+llvm19gfx1151\.k[0-9a-f]{16}", old_version), old_version

        # Nothing changed: nothing built, no folder of dist/ named or changed.
        before = dist_files(ws)
        again = package("nothing changed")
        assert again.built == [] and "Wrote dist/" not in again.stderr
        assert "in its chain: 6 unchanged in dist/" in summary(again.stderr)
        assert "  install set dist/tests.mini.vllm.install/: unchanged" in summary(again.stderr)
        assert dist_files(ws) == before

        # dist/ current, another target's rule asks for the package (design.md: a `package`
        # member composes): an `archive` of it holds the whole chain and its install set.
        ws.write("bundle/BUILD", 'archive(name="bundle", packages=["tests/mini/vllm:wheel"], format="zip")\n')
        require_success(ws.pants("-ldebug", "package", "bundle:bundle"), "an archive of the chain")
        with zipfile.ZipFile(ws.path("dist/bundle/bundle.zip")) as zf:
            bundled = {n: hashlib.sha256(zf.read(n)).hexdigest() for n in zf.namelist()}
        assert {f"dist/{n}": h for n, h in bundled.items()} == before
        assert len([n for n in bundled if n.endswith(".whl") and "/wheels/" not in n]) == 6

        # A patch of ours edited, with pantsd up: the patched wheel's build starts once.
        ws.write(PATCH, ws.read(PATCH).replace('"gfx1151"', '"gfx1151 (patched again)"'))
        edit = package("the build after a patch edit")
        # Its build process starts once, after the chain's checks (the preflight's metadata hook),
        # and is not cancelled. (Pants may start the rule that asks for it while it cleans its
        # graph, and cancel it: the rule waits for the checks first, so nothing has run then.)
        starts = re.findall(rf"Starting: Building rocm_wheel {re.escape(VLLM)}$", edit.stderr, re.M)
        shown = "\n".join(l for l in edit.stderr.splitlines() if "Building rocm_wheel" in l or "metadata hook" in l)
        assert len(starts) == 1, shown
        assert f"Canceled: Building rocm_wheel {VLLM}" not in edit.stderr, shown
        hook = edit.stderr.index(f"Completed: Running the metadata hook of {VLLM}")
        assert hook < edit.stderr.index(f"Starting: Building rocm_wheel {VLLM}"), shown
        assert edit.built == [VLLM]
        said = summary(edit.stderr)
        assert "in its chain: 1 built, 5 unchanged in dist/" in said, said
        assert re.search(rf"^  built      mini_vllm-1\.0\.0\+llvm19gfx1151\.k[0-9a-f]{{16}}-\S+ \({re.escape(VLLM)}\): patch {PATCH} changed \(", said, re.M), said
        assert len(re.findall(r"^  unchanged  ", said, re.M)) == 5, said
        # Its folder and the install set's are named and new; every other wheel's files are as they were.
        assert sorted(re.findall(r"Wrote (dist/\S+)", edit.stderr)) == ["dist/tests.mini.vllm", INSTALL], edit.stderr[-3000:]
        after = dist_files(ws)
        kept = {p: t for p, t in before.items() if not p.startswith(("dist/tests.mini.vllm/", f"{INSTALL}/"))}
        assert {p: after.get(p) for p in kept} == kept
        (new_wheel,) = ws.path("dist/tests.mini.vllm").glob("*.whl")  # the old version is gone
        new_version = new_wheel.name.split("-")[1]
        assert new_version != old_version and new_version.startswith("1.0.0+llvm19gfx1151.k")
        assert f"mini_vllm=={new_version} --hash=sha256:" in ws.read(f"{INSTALL}/requirements.txt")

        # The set's own command, as its header gives it, in the venv that holds the old set.
        header = [l for l in ws.read(f"{INSTALL}/requirements.txt").splitlines() if l.startswith("#")]
        command = next(l[1:].strip() for l in header if l.lstrip("# ").startswith("pip install --no-index"))
        assert command == "pip install --no-index --find-links wheels --require-hashes -r requirements.txt", header
        assert any("over an older set" in l for l in header) and header[1].startswith("# first, check this machine: python3 check_box.py")
        pip = subprocess.run(
            [str(venv / "bin/python"), "-m", "pip", "--disable-pip-version-check", *command.split()[1:]],
            cwd=ws.path(INSTALL), env=CLEAN_ENV, capture_output=True, text=True,
        )  # fmt: skip
        assert pip.returncode == 0, pip.stderr
        assert f"Successfully installed mini_vllm-{new_version}" in pip.stdout.replace("mini-vllm", "mini_vllm"), pip.stdout
        shown = run_in_set(ws.path(INSTALL), venv, SHOW)
        assert (shown.returncode, shown.stdout) == (0, "gfx1151 (patched again)\n"), shown.stderr
    finally:
        ws.stop()
