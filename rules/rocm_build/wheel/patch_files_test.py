from rocm_build.wheel.patch_files import missing_patch_files

MEMBERS = ["torch/__init__.py", "torch/lib/libtorch_hip.so", "torch/include/torch/csrc/api.h", "pkg/__init__.py", "torch-2.13.0.dist-info/RECORD"]


def test_a_file_a_patch_adds_must_be_in_the_wheel_that_ships_its_directory() -> None:
    added = [
        "torch/_rocm_init.py",  # the torch case: left out by the backend
        "src/pkg/tuning.json",  # a src/ layout: the wheel ships pkg/
        "rocm_pants_wheel/setup.py",  # a build input (AOTriton's wheel recipe): never shipped
        "torch/csrc/rocm_init.cpp",  # a source the build compiles
        "tools/helper.py",  # a directory the wheel does not ship
        "tests/torch/expected.json",  # not a package root: not the wheel's torch/
    ]
    problems = missing_patch_files("c:torch", "torch-2.13.0-cp312-cp312-linux_x86_64.whl", "patches/torch/", added, MEMBERS)
    assert [p.split(",")[0] for p in problems] == ["c:torch: torch/_rocm_init.py", "c:torch: src/pkg/tuning.json"]
    assert problems[0] == (
        "c:torch: torch/_rocm_init.py, which our patches add (patches/torch/), is not in torch-2.13.0-cp312-cp312-linux_x86_64.whl, "
        "although the wheel ships torch/: the build backend left it out (a file the tree's .gitignore covers under "
        "scikit-build-core, or data no `package_data` names). Make the build include it (e.g. `-Cwheel.force-include` for "
        "scikit-build-core, `package_data` for setuptools) in the patch"
    )
    assert missing_patch_files("c:torch", "w.whl", "patches/torch/", added, [*MEMBERS, "torch/_rocm_init.py", "pkg/tuning.json"]) == []
