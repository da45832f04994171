"""Bad input and faults on the miniature chain: a clear error every time, nothing lost.

Every case runs the real `./pants` in one copy of the repository and asserts the exit
status, that the message names the target, the file or pin and the fix, and that dist/ and
the pins file are exactly as before.
"""

from __future__ import annotations


import os
import re
import signal
import time
from pathlib import Path
from typing import Callable, Dict

import pytest

from e2e.wheels import unkeyed
from e2e.workspace import Workspace, borrowed, require_success
from mini import make_upstreams

PINS_DIR = "tests/mini/pins"
PINS = "tests/mini/pins/mini-vllm.toml"
AOT_PINS = "tests/mini/pins/mini-aotriton.toml"
VLLM = "tests/mini/vllm:wheel"
AOT = "tests/mini/aotriton:wheel"
AOT_BUILD = "tests/mini/aotriton/BUILD"
VLLM_PATCH = "tests/mini/patches/vllm/0001-report-gfx1151.patch"
GOOD_BUILD: Dict[str, str] = {}  # what the fixture's good build printed


@pytest.fixture(scope="module")
def ws(tmp_path_factory, batch_copy):
    with borrowed(batch_copy, tmp_path_factory.mktemp("errors") / "upstreams") as workspace:
        GOOD_BUILD["stderr"] = require_success(workspace.package(VLLM), "the good build every case starts from").stderr
        yield workspace


def snapshot(ws: Workspace) -> Dict[str, bytes]:
    files = {str(p.relative_to(ws.root)): p.read_bytes() for p in (ws.root / "dist").rglob("*") if p.is_file()}
    files[PINS] = ws.path(PINS).read_bytes()
    return files


def sub(old: str, new: str, count: int = 1) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, f"fixture drifted: {old!r} not found"
        return text.replace(old, new, count)

    return edit


def pin_field(name: str, field: str, value: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        head, _, rest = text.partition(f"[{name}]\n")
        body, sep, tail = rest.partition("\n\n")
        lines = [line for line in body.splitlines() if not line.startswith(f"{field} =")]
        if value is not None:
            lines.append(f"{field} = {value}")
        return f"{head}[{name}]\n" + "\n".join(lines) + sep + tail

    return edit


def wheel_field(extra: str) -> Callable[[str], str]:
    return sub('    kind="aotriton",\n', f'    kind="aotriton",\n    {extra},\n')


UNDEFINED_EDIT = """\
[[edit]]
path = "csrc/module.c"
pattern = 'PyLong_FromLong\\(42\\)'
replace = "PyLong_FromLong(mini_vllm_missing_answer())"
count = 1

[[edit]]
path = "csrc/module.c"
pattern = '#include <Python.h>'
replace = "#include <Python.h>\\nlong mini_vllm_missing_answer(void);"
count = 1
"""

ADDED_FILE_PATCH = """\
Add the gfx1151 tuning table (a stand-in for torch/_rocm_init.py, which our torch patch adds).

--- /dev/null
+++ b/mini_vllm/gfx1151.json
@@ -0,0 +1 @@
+{"gfx1151": {"block": 64}}
"""
# Made against the pinned mini_vllm/__init__.py, whose first lines 0001-report-gfx1151.patch changes.
NOT_ON_TOP_PATCH = """\
Why: a stand-in for a patch made without the one before it.
Upstream: none
Drop when: never

--- a/mini_vllm/__init__.py
+++ b/mini_vllm/__init__.py
@@ -1,3 +1,3 @@
-import os
+import os  # kernel_archs lists the code objects
 
 from . import _C
"""
# The failures whose message was said twice (a log line, then the error): said once now.
SAID_ONCE = {"patch does not apply", "patch not on top of the one before"}
CASES = [
    # --- pins
    ("unknown pin", {"tests/mini/vllm/BUILD": sub('pin="mini-vllm"', 'pin="mini-vlm"')}, VLLM,
     ["tests/mini/vllm:src: pin `mini-vlm` is not in tests/mini/pins (known pins: mini-aotriton, mini-flash_attention, mini-torch, mini-vllm)",
      "add a [mini-vlm] table"]),
    ("malformed sha", {PINS: pin_field("mini-vllm", "commit", '"' + "z" * 40 + '"')}, VLLM,
     ["tests/mini/vllm:src: tests/mini/pins/mini-vllm.toml: [mini-vllm] field `commit`: '" + "z" * 40 + "' is not a commit SHA (40 lowercase hex digits)"]),
    ("short sha", {PINS: pin_field("mini-vllm", "commit", '"3d342db"')}, VLLM,
     ["tests/mini/pins/mini-vllm.toml: [mini-vllm] field `commit`: '3d342db' is a short SHA (7 hex digits)", "full 40-digit commit"]),
    ("branch in commit", {PINS: pin_field("mini-vllm", "commit", '"main"')}, VLLM,
     ["tests/mini/pins/mini-vllm.toml: [mini-vllm] field `commit`: 'main' looks like a branch or tag name", "put the branch in `track`"]),
    ("sha not upstream", {PINS: pin_field("mini-vllm", "commit", '"' + "1" * 40 + '"')}, VLLM,
     ["tests/mini/vllm:src: pin `mini-vllm` in tests/mini/pins: commit " + "1" * 40 + " was not found at file://",
      "pants run rules:update-pins -- --only mini-vllm"]),
    ("unreachable url", {PINS: pin_field("mini-vllm", "url", '"file:///nonexistent/vllm"')}, VLLM,
     ["tests/mini/vllm:src: pin `mini-vllm` in tests/mini/pins: cannot fetch from file:///nonexistent/vllm",
      "Check the URL, the network"]),
    ("toml syntax error", {PINS: sub('track = "main"', 'track = "main', 1)}, VLLM,
     ["tests/mini/vllm:src: tests/mini/pins/mini-vllm.toml: TOML syntax error at line 6, column 14: Unbalanced quotes"]),
    ("missing field", {PINS: pin_field("mini-vllm", "track", None)}, VLLM,
     ["tests/mini/pins/mini-vllm.toml: [mini-vllm] field `track`: missing (every pin needs url and track; `pants run rules:update-pins` fills its commit)"]),
    # --- patches
    ("patch does not apply", {VLLM_PATCH: sub(" import os\n", " import sys\n")}, VLLM,
     ["tests/mini/vllm:src: tests/mini/patches/vllm/0001-report-gfx1151.patch: the hunk at mini_vllm/__init__.py line 1 does not match the pinned source. "
      "No patch before it changes mini_vllm/__init__.py: the pinned file changed there (or this patch did); refresh the patch against the pinned commit",
      "Fix it in a patch workspace: `./pants patch-workspace tests/mini/vllm:src` checks out the pinned tree with the patches before it"]),
    # A patch made against the pinned file where the patch before it changed the lines: that one is named.
    ("patch not on top of the one before", {"tests/mini/patches/vllm/0002-also.patch": lambda _: NOT_ON_TOP_PATCH}, VLLM,
     ["tests/mini/vllm:src: tests/mini/patches/vllm/0002-also.patch: the hunk at mini_vllm/__init__.py line 1 does not match "
      "mini_vllm/__init__.py as tests/mini/patches/vllm/0001-report-gfx1151.patch leaves it, but it does match the "
      "pinned file: it was made without tests/mini/patches/vllm/0001-report-gfx1151.patch, which the build applies before it. "
      "Remake this patch on top of it.",
      "`./pants patch-workspace tests/mini/vllm:src`"]),
    ("empty patch", {"tests/mini/patches/vllm/0002-empty.patch": lambda _: ""}, VLLM,
     ["tests/mini/patches/vllm/0002-empty.patch: the patch file is empty; delete it or regenerate it"]),
    ("edit matches 0", {"tests/mini/patches/torch/0001-answer.edit.toml": sub("42", "43")}, VLLM,
     ["tests/mini/torch:src: tests/mini/patches/torch/0001-answer.edit.toml: edit 1 on csrc/module.c: pattern 'PyLong_FromLong\\\\(43\\\\)' matched 0 time(s), expected exactly 1",
      "update the pattern or `count`"]),
    ("edit matches 2", {"tests/mini/patches/torch/0001-answer.edit.toml": sub("PyLong_FromLong\\(42\\)", "PyObject")}, VLLM,
     ["tests/mini/patches/torch/0001-answer.edit.toml: edit 1 on csrc/module.c: pattern 'PyObject' matched", "expected exactly 1"]),
    ("patch outside tree", {VLLM_PATCH: lambda t: t.replace("a/mini_vllm", "a/../mini_vllm").replace("b/mini_vllm", "b/../mini_vllm")}, VLLM,
     ["tests/mini/patches/vllm/0001-report-gfx1151.patch, line 8: touches `../mini_vllm/__init__.py`, which is outside the source tree"]),
    # --- rocm_wheel
    ("unknown gpu target", {AOT_BUILD: sub('gpu_targets=["gfx1151"]', 'gpu_targets=["gfx1115"]')}, AOT,
     ["tests/mini/aotriton:wheel: unknown gpu target `gfx1115` in `gpu_targets`. Did you mean `gfx1151`?"]),
    ("dependency cycle", {AOT_BUILD: sub("dependencies=[]", 'dependencies=["tests/mini/vllm:wheel"]')}, VLLM,
     ["rocm_wheel dependencies form a cycle: tests/mini/vllm:wheel -> tests/mini/flash_attention:wheel -> tests/mini/torch:wheel -> tests/mini/aotriton:wheel -> tests/mini/vllm:wheel",
      "remove one of these `dependencies` edges"]),
    ("missing toolchain", {"tests/mini/BUILD": sub('path="/usr/lib/llvm-19"', 'path="/opt/no-llvm"')}, AOT,
     ["tests/mini:llvm: the llvm ROCm toolchain is missing: nothing usable at `path` '/opt/no-llvm'",
      "apt-get install clang-19 lld-19 llvm-19"]),
    ("build command fails", {AOT_BUILD: wheel_field('build_command=["echo the compiler said no >&2", "exit 3"]')}, AOT,
     ["rocm_wheel tests/mini/aotriton:wheel: the build failed (exit 3)", "the compiler said no",
      "Full log: {named}/rocm_build_logs/tests.mini.aotriton@wheel.log"]),
    ("timeout", {AOT_BUILD: wheel_field('build_command=["sleep 60"], timeout=3')}, AOT,
     ["rocm_wheel tests/mini/aotriton:wheel: the build exceeded its timeout of 3 s (raise `timeout`"]),
    # An upstream build that ignores PYTORCH_ROCM_ARCH and hard-codes another arch.
    ("gpu code for another arch", {AOT_BUILD: wheel_field('env={"PYTORCH_ROCM_ARCH": "gfx1100"}')}, AOT,
     ["tests/mini/aotriton:wheel: the code objects in mini_aotriton-1.0.0+llvm19gfx1151-",
      "(mini_aotriton/kernels/scale-gfx1100.co) carry AMDGPU code for gfx1100, but none for gfx1151 (gpu_targets: "
      "gfx1151). On a gfx1151 GPU it would fail with hipErrorInvalidImage", "or accept it with `allow_missing_gpu_targets`"]),
    # An extension that calls a function nothing defines: it builds and links (a shared object
    # may leave symbols undefined); `import` would fail.
    ("undefined symbol", {"tests/mini/patches/vllm/0002-undefined.edit.toml": lambda _: UNDEFINED_EDIT}, VLLM,
     ["tests/mini/vllm:wheel: the install set would not load on the box (1 problem(s); nothing was written to dist/):",
      "  - mini_vllm/_C.cpython-311-x86_64-linux-gnu.so in mini_vllm-1.0.0+llvm19gfx1151-cp311-cp311-linux_x86_64.whl "
      "needs mini_vllm_missing_answer, undefined in what it loads (libmini_torch.so "
      "(mini_torch-1.0.0+llvm19gfx1151-cp311-cp311-linux_x86_64.whl), libmini_hip.so.1 "
      "(mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl)): expected from libmini_torch.so",
      "`import` would fail with \"undefined symbol: mini_vllm_missing_answer\"."]),
    # A file our patch adds that the build backend leaves out of the wheel (setuptools ships no
    # data file without `package_data`; scikit-build-core none its .gitignore covers).
    ("patch-added file left out", {"tests/mini/patches/vllm/0002-gfx1151-table.patch": lambda _: ADDED_FILE_PATCH}, VLLM,
     ["tests/mini/vllm:wheel: mini_vllm/gfx1151.json, which our patches add (tests/mini/patches/vllm/), is not in "
      "mini_vllm-1.0.0+llvm19gfx1151-cp311-cp311-linux_x86_64.whl, although the wheel ships mini_vllm/: the build backend "
      "left it out"]),
    ("pip cmake", {AOT_BUILD: wheel_field(
        'build_command=["printf \'#!/bin/sh\\\\necho pip cmake\\\\n\' > $ROCM_BUILD_DEPS_PREFIX/bin/cmake", '
        '"chmod +x $ROCM_BUILD_DEPS_PREFIX/bin/cmake"]')}, AOT,
     ["rocm_build: refusing to build tests/mini/aotriton:wheel: `cmake` resolves to a pip-installed cmake (.venv/bin/cmake)",
      "never pip's; pip's cmake breaks ROCm/HIP compilation"]),
]  # fmt: skip


@pytest.mark.parametrize("name, edits, target, expected", CASES, ids=[c[0] for c in CASES])
def test_error(ws: Workspace, name, edits, target, expected) -> None:
    before = snapshot(ws)
    originals = {rel: (ws.read(rel) if ws.path(rel).exists() else None) for rel in edits}
    try:
        for rel, edit in edits.items():
            ws.write(rel, edit(originals[rel] or ""))
        run = ws.package(target)
    finally:
        for rel, text in originals.items():
            if text is None:
                ws.path(rel).unlink()
            else:
                ws.write(rel, text)
    assert run.returncode != 0, f"{name}: expected a failure"
    for text in expected:
        assert text.format(named=ws.named_caches) in unkeyed(run.stderr), f"{name}:\n{run.stderr[-4000:]}"
    if name in SAID_ONCE:
        assert unkeyed(run.stderr).count(expected[0]) == 1, run.stderr[-4000:]
    assert "Traceback" not in run.stderr
    assert snapshot(ws) == before


def check_without(ws: Workspace, wheel: Path):
    """`rocm-plan --check` of the install set in dist/ without one of its wheels (put back after)."""
    data = wheel.read_bytes()
    wheel.unlink()
    try:
        run = ws.pants("rocm-plan", "--check", VLLM)
    finally:
        wheel.write_bytes(data)
    assert run.returncode != 0
    return run


def test_plan_check_reads_the_install_set_in_dist(ws: Workspace) -> None:
    # As on a box: the set in dist/ loses the SDK's wheel; rocm-plan --check says what breaks.
    wheels = ws.path("dist/tests.mini.vllm.install/wheels")
    (sdk,) = wheels.glob("mini_rocm_sdk_core-*.whl")
    good = require_success(ws.pants("rocm-plan", "--check", VLLM), "the check of the good set")
    assert "ok    install set dist/tests.mini.vllm.install  (" in good.stdout
    # The SDK's split device code (libmini_blas.so.1's HIPK reference, the device wheel's .kpack
    # archive: tests/mini/make_sdk.py) was read by `package` and is read by the check.
    assert "the 1 GPU kernel(s) their libraries keep in device wheels (.kpack files) are there for each gpu target)" in good.stdout, good.stdout
    assert f"{VLLM}: the install set loads: " in GOOD_BUILD["stderr"]
    assert "the 1 GPU kernel(s) their libraries keep in device wheels (.kpack files) are there" in GOOD_BUILD["stderr"]
    (device,) = wheels.glob("mini_rocm_sdk_device_gfx1151-*.whl")
    run = check_without(ws, device)
    assert (
        "      - _mini_rocm_sdk_core/lib/libmini_blas.so.1 in mini_rocm_sdk_core-1.0.0-py3-none-linux_x86_64.whl references "
        "kernel mini-sdk/stage/lib/libmini_blas.so.1#0 for gfx1151; it looks in "
        "_mini_rocm_sdk_core/.kpack/blas_lib_gfx1151.kpack, which no wheel of the set installs: the device wheel "
        "mini-rocm-sdk-device-gfx1151 should carry it: add it to the chain (a device pin of mini-rocm-sdk-core for "
        "gfx1151). On a gfx1151 GPU it fails with hipErrorInvalidImage."
    ) in run.stdout, run.stdout
    run = check_without(ws, sdk)
    assert "FAIL  install set dist/tests.mini.vllm.install" in run.stdout
    assert (
        "      - mini_torch/lib/libmini_torch.so in mini_torch-1.0.0+llvm19gfx1151-cp311-cp311-linux_x86_64.whl needs "
        "libmini_hip.so.1: no wheel of the set ships it."
    ) in unkeyed(run.stdout), run.stdout


def test_pants_check_runs_the_preflight_and_names_the_patch_that_no_longer_applies(ws: Workspace) -> None:
    # `pants check`, where Pants users look for checks, reports the components as `rocm-plan
    # --check` does. It judges sources, pins, locks and recipes, never what an earlier `package`
    # left in dist/: the install set there is `rocm-plan --check`'s alone.
    good = require_success(ws.pants("check", VLLM), "pants check of the good chain")
    assert "✓ rocm-preflight succeeded." in good.stderr
    assert "install set" not in good.stderr
    assert "all 4 component(s) ok." in good.stderr
    original = ws.read(VLLM_PATCH)
    ws.write(VLLM_PATCH, sub(" import os\n", " import sys\n")(original))
    try:
        run = ws.pants("check", VLLM)
        plan = ws.pants("rocm-plan", "--check", VLLM)
    finally:
        ws.write(VLLM_PATCH, original)
    assert run.returncode == 1 and plan.returncode == 1
    assert "✕ rocm-preflight failed." in run.stderr
    failed = (
        "FAIL  tests/mini/vllm:wheel\n"
        "      - tests/mini/vllm:src: tests/mini/patches/vllm/0001-report-gfx1151.patch: the hunk at mini_vllm/__init__.py "
        "line 1 does not match the pinned source."
    )
    # The same components' report, line for line (both goals call one function), after the
    # install set in dist/ that only rocm-plan --check reads.
    sets, components = re.split(r"^(?=(?:ok|FAIL|skip) +tests/mini/)", plan.stdout.strip(), maxsplit=1, flags=re.M)
    assert sets.startswith("ok    install set dist/tests.mini.vllm.install  ("), plan.stdout
    assert failed in components, plan.stdout
    assert components in run.stderr, (plan.stdout, run.stderr[-3000:])
    assert "./pants patch-workspace tests/mini/vllm:src" in run.stderr
    assert "Traceback" not in run.stderr and "Building rocm_wheel" not in run.stderr


def test_symlink_escape(ws: Workspace) -> None:
    repo = ws.upstreams.root / "vllm"
    os.symlink("../../outside", repo / "escape")
    sha = make_upstreams.commit(repo, {}, "a symlink out of the tree")
    before_pins = ws.read(PINS)
    ws.write(PINS, before_pins.replace(ws.upstreams.commits["vllm"], sha))
    patch = "tests/mini/patches/vllm/0002-escape.patch"
    ws.write(patch, "--- a/escape/evil.txt\n+++ b/escape/evil.txt\n@@ -0,0 +1 @@\n+pwned\n".replace("--- a/escape/evil.txt", "--- /dev/null"))
    try:
        run = ws.package(VLLM)
    finally:
        ws.path(patch).unlink()
        ws.write(PINS, before_pins)
    assert run.returncode != 0
    assert (
        "tests/mini/patches/vllm/0002-escape.patch, line 2: touches `escape/evil.txt` through the symbolic link "
        "`escape` (to `../../outside`, outside the source tree); patch the file the link points to instead"
    ) in run.stderr


def test_host_environment_does_not_leak(ws: Workspace) -> None:
    original = ws.read(AOT_BUILD)
    probe = (
        'build_command=["if env | grep -q ROCM_PANTS_LEAK_CANARY; then echo host env leaked; exit 9; fi", '
        '"case $PATH in *pyenv*|*.cargo*) echo host PATH leaked; exit 9;; esac"]'
    )
    ws.write(AOT_BUILD, wheel_field(probe)(original))
    try:
        ws.pants_env_extra = {"ROCM_PANTS_LEAK_CANARY": "1"}
        run = ws.package(AOT)
    finally:
        ws.pants_env_extra = {}
        ws.write(AOT_BUILD, original)
    require_success(run, "a build with a canary in the host environment")
    assert run.built == [AOT]


def test_interrupted_build_leaves_no_wheel_and_resumes(ws: Workspace) -> None:
    original = ws.read(AOT_BUILD)
    ws.write(AOT_BUILD, wheel_field('build_command=["sleep 15"], env={"RUN": "interrupted"}')(original))
    before = snapshot(ws)
    try:
        proc = ws.start("package", AOT)
        deadline = time.time() + 120
        while "Starting: Building rocm_wheel tests/mini/aotriton:wheel" not in ws.partial_stderr(proc):
            assert time.time() < deadline and proc.poll() is None, ws.partial_stderr(proc)
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert proc.returncode != 0
        assert snapshot(ws) == before
        # The same build, run again, starts from scratch and completes.
        again = require_success(ws.package(AOT), "the run after Ctrl-C")
        assert again.built == [AOT]
    finally:
        ws.write(AOT_BUILD, original)


def test_optional_dependency_failure_is_reported_and_dependents_still_build(ws: Workspace) -> None:
    # An AITER stand-in: optional, and its build fails.
    ws.path("tests/mini/aiter").mkdir(exist_ok=True)
    ws.write("tests/mini/aiter/BUILD", (
        'rocm_wheel(name="wheel", source="tests/mini/aotriton:src", toolchain="tests/mini:llvm",\n'
        '           gpu_targets=["gfx1151"], kind="aiter", optional=True,\n'
        '           build_command=["echo inline asm not supported on gfx1151 >&2", "exit 7"])\n'
    ))  # fmt: skip
    vllm_build = "tests/mini/vllm/BUILD"
    original = ws.read(vllm_build)
    ws.write(vllm_build, original.replace('"tests/mini/flash_attention:wheel"]', '"tests/mini/flash_attention:wheel", "tests/mini/aiter:wheel"]'))
    try:
        run = require_success(ws.package(VLLM), "a chain with a failing optional dependency")
    finally:
        ws.write(vllm_build, original)
        (ws.path("tests/mini/aiter/BUILD")).unlink()
    assert "rocm_wheel tests/mini/aiter:wheel: the build failed (exit 7)" in run.stderr
    assert "inline asm not supported on gfx1151" in run.stderr
    assert "tests/mini/aiter:wheel is optional: its dependents are built without it." in run.stderr
    # Only the failed attempt ran: without the optional wheel vllm's inputs are what they
    # were, so it comes from the cache, and it is in dist/.
    assert run.built == ["tests/mini/aiter:wheel"]
    assert not list(ws.path("dist").glob("tests.mini.aiter/*.whl"))
    assert list(ws.path("dist").glob("tests.mini.vllm/*.whl"))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('track = "main"', 'track = "no-such-branch"', 1),
         '[mini-aotriton] `track = "no-such-branch"` is neither a branch nor a tag at file://'),
        (lambda t: t.replace("/aotriton", "/gone", 1), "[mini-aotriton] cannot reach file://"),
    ],
    ids=["missing ref", "network failure"],
)  # fmt: skip
def test_update_pins_failures_leave_pins_untouched(ws: Workspace, edit, message) -> None:
    original = ws.read(AOT_PINS)
    ws.write(AOT_PINS, edit(original))
    before = {**snapshot(ws), AOT_PINS: ws.path(AOT_PINS).read_bytes()}
    try:
        run = ws.pants("run", "rules:update-pins", "--", "--pins-file", PINS_DIR, "--patches-dir", "tests/mini/patches")
        assert run.returncode == 1
        assert message in run.stderr and "the pins file was not changed" in run.stderr
        assert {**snapshot(ws), AOT_PINS: ws.path(AOT_PINS).read_bytes()} == before
    finally:
        ws.write(AOT_PINS, original)
