import json
import zipfile

from rocm_build.wheel.rebuild import Inputs, changes, first_reason, inputs_of, last_build_info, verdict

INFO = {
    "source": {"pin": "vllm", "commit": "a" * 40, "patches": [{"path": "patches/vllm/0001.patch", "sha256": "1" * 64}]},
    "build_requirements": {"sha256": "2" * 64},
    "python": "CPython 3.12.1",
    "toolchain": {"address": "components:rocm", "identity": "..."},
    "env": {"PYTORCH_ROCM_ARCH": "gfx1151"},
    "gpu_targets": ["gfx1151"],
    "archives": {},
}
SAME = Inputs("vllm", "a" * 40, {"patches/vllm/0001.patch": "1" * 64}, "2" * 64, "CPython 3.12.1", "components:rocm",
              {"PYTORCH_ROCM_ARCH": "gfx1151"}, ("gfx1151",), {})  # fmt: skip


def test_nothing_changed_and_each_kind_of_change() -> None:
    assert changes(INFO, SAME) == []
    moved = Inputs("vllm", "b" * 40, {"patches/vllm/0001.patch": "3" * 64, "patches/vllm/0002.patch": "4" * 64}, None,
                   "CPython 3.11.7", "components:opt-rocm", {"PYTORCH_ROCM_ARCH": "gfx1100;gfx1151"},
                   ("gfx1100", "gfx1151"), {"LLVM_SYSPATH": "5" * 64}, "sha256:" + "6" * 64,
                   {"components/therock:torch": "7" * 64})  # fmt: skip
    assert changes(INFO, moved) == [
        f"pin `vllm` moved {'a' * 12} -> {'b' * 12}",
        f"patch patches/vllm/0001.patch changed ({'1' * 12} -> {'3' * 12})",
        "patch patches/vllm/0002.patch added",
        f"lock changed ({'2' * 12} -> None)",
        "Python CPython 3.12.1 -> CPython 3.11.7",
        "toolchain components:rocm -> components:opt-rocm",
        "env PYTORCH_ROCM_ARCH: 'gfx1151' -> 'gfx1100;gfx1151'",
        f"build image none (this machine) -> sha256:{'6' * 12}",
        f"prebuilt components/therock:torch none -> {'7' * 12}",
        "gpu targets gfx1151 -> gfx1100, gfx1151",
        "archive LLVM_SYSPATH changed",
    ]


def test_a_recipe_change_and_an_archive_pin_are_said() -> None:
    recipe = {"steps": ["make"], "wheel_command": "pip wheel .", "kept_build_dir": ""}
    before = {**INFO, "recipe": recipe}
    edited = {**before, "recipe": {**recipe, "steps": ["make -j2"]}}
    assert changes(before, inputs_of(edited)) == ["recipe's steps changed"]
    # A wheel built before the recipe was recorded: nothing said of it.
    assert changes(INFO, inputs_of(edited)) == []
    # An archive-built wheel records its pin's sha256, not a commit.
    sdist = {**before, "source": {"pin": "vllm-sdist", "sha256": "c" * 64, "patches": []}}
    assert first_reason(sdist, sdist, []) == (
        "the same inputs, other bytes than the wheel in dist/ (edited by hand there, or a build that is not "
        "reproducible: `pants verify-reproducible` tells)"
    )
    moved = {**sdist, "source": {**sdist["source"], "sha256": "d" * 64}}
    assert first_reason(sdist, moved, []) == f"pin `vllm-sdist` moved {'c' * 12} -> {'d' * 12}"


def test_verdicts() -> None:
    assert verdict(["patch x changed"], ["a:wheel"], "dist/x/") == "yes: patch x changed"
    assert verdict([], ["components/torch:wheel"], "dist/x/").startswith(
        "maybe: its dependencies components/torch:wheel rebuild or may; where their wheels come out the same"
    )
    assert verdict([], [], None).startswith("unknown: no wheel of it in dist/")
    assert verdict([], [], "dist/x/").startswith("no: same inputs as the wheel in dist/x/")


def test_reads_the_build_info_of_the_wheel_in_the_folder(tmp_path) -> None:
    assert last_build_info(tmp_path) is None
    with zipfile.ZipFile(tmp_path / "vllm-1.0+rocm7.14gfx1151-cp312-cp312-linux_x86_64.whl", "w") as zf:
        zf.writestr("vllm-1.0+rocm7.14gfx1151.dist-info/rocm_build_info.json", json.dumps(INFO))
    assert last_build_info(tmp_path) == INFO
