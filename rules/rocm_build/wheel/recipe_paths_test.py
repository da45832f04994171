from rocm_build.wheel.recipe_paths import NamedPath, missing_paths, named_paths
from rocm_build.wheel.target_types import WheelCommandField

DEFAULT_WHEEL = WheelCommandField.default


def test_the_real_recipes_name_these_files() -> None:
    # components/aotriton: cmake, then the wheel is built in the directory the patch adds.
    aotriton = named_paths(
        ("-r requirements.txt", "ninja"),
        ("cmake -S . -B build -G Ninja", "cmake --build build --target install", "cd rocm_pants_wheel"),
        DEFAULT_WHEEL,
    )
    assert [(p.path, p.is_project) for p in aotriton] == [("requirements.txt", False), ("rocm_pants_wheel", True)]
    # components/torch: a script of the tree, and an inline `python -c` that names no file.
    torch = named_paths(
        (),
        (
            "export P=$(python -c 'import aotriton_rocm, os; print(os.path.dirname(aotriton_rocm.__file__))')",
            "python tools/amd_build/build_amd.py",
        ),
        DEFAULT_WHEEL,
    )
    assert [p.path for p in torch] == ["tools/amd_build/build_amd.py", ""]
    assert torch[0].named_by == "build_command `python tools/amd_build/build_amd.py`"


def test_interpreter_options_cd_and_variables() -> None:
    paths = named_paths(
        (),
        (
            "python3 -u -W ignore scripts/gen.py --out x",
            "cd sub && bash ./prep.sh; ./configure",
            "python -m build_helpers --flag",
            "python $PWD/generated.py",
            "cd ../other",
            "source env.sh",
        ),
        "python -m build --wheel -o \"$WHEEL_OUT\"",
    )
    assert [p.path for p in paths] == ["scripts/gen.py", "sub/prep.sh", "sub/configure", "other/env.sh", "other"]
    assert paths[-1].is_project
    # A cd whose target is known only at run time ends the search: nothing after it is asked for.
    assert named_paths((), ("cd $BUILD_DIR", "python x.py"), DEFAULT_WHEEL) == ()


def test_missing_paths_looks_for_project_files() -> None:
    files = ["setup.py", "requirements/build.txt", "sub/pyproject.toml"]
    wanted = (
        NamedPath("requirements/build.txt", "r"),
        NamedPath("requirements/build/rocm.txt", "r2"),
        NamedPath("", "root project", is_project=True),
        NamedPath("sub", "sub project", is_project=True),
        NamedPath("other", "missing project", is_project=True),
    )
    assert [p.named_by for p in missing_paths(wanted, files)] == ["r2", "missing project"]
