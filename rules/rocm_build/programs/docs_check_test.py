"""docs_check on this repository's pages (what CI keeps true), and on a small tree with one
of each mistake, by its exact text."""

from pathlib import Path

from rocm_build.programs.docs_check import anchor, check, commands, pages


def test_the_repositorys_pages_hold() -> None:
    # The sandbox holds the pages and what their commands and links name (//:docs-sources).
    root = Path(".").resolve()
    found = pages(root)
    assert {"README.md", "docs/real-chain.md", "docs/pants-versions.md", "components/README.md"} <= {str(p.relative_to(root)) for p in found}
    assert sum(1 for page in found for _ in commands(root, page)) >= 25  # what the check below covers
    assert check(root) == []


def test_github_anchors() -> None:
    assert anchor("Will it run on the box: the install set and the kernels, checked without a GPU") == (
        "will-it-run-on-the-box-the-install-set-and-the-kernels-checked-without-a-gpu"
    )
    assert anchor("Hermetic builds: locks, archives, no network") == "hermetic-builds-locks-archives-no-network"
    assert anchor("`triton_kernel_test` and its fields") == "triton_kernel_test-and-its-fields"


def write(root: Path, files: dict) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


GOAL = 'class PlanSubsystem:\n    name = "rocm-plan"\n    check = BoolOption(default=False, help="...")\n'
PROGRAM = 'parser.add_argument("--only")\n'


def test_each_mistake_is_named(tmp_path: Path) -> None:
    write(tmp_path, {
        "README.md": "# x\n\n[Pins](docs/pins.md) and [a page that is\ngone](docs/gone.md) and [web](https://example.org)\n",
        "docs/pins.md": (
            "# Pins\n\n## Moving them\n\n[ok](#moving-them), [bad](#moving), [up](../README.md#x)\n\n"
            "    ./pants rocm-plan --check components/vllm:wheel\n"
            "    ./pants rocm-plan --frobnicate components/vllm:whee\n"
            "    ./pants packgae components/nothere:wheel\n"
            "    ./pants run rules:update-pins -- --only vllm --dry-rum\n"
            "    ./pants --pants-config-files=pants.remote.toml test tests::\n"
            "    python3 bench/run.py && tests/mini/make_upstreams.py\n"
            "    ./pants --no-pantsd rocm-plan --check components/vllm:wheel\n"  # a global option before the goal
            "    ./pants test --test-output all tests::\n"  # an option's value is not a goal
            "\n```\nrebuild   yes: tests/mini/vllm:wheel (output, not a command)\n```\n"
        ),
        "docs/orphan.md": "# Orphan\n",
        "components/vllm/BUILD": 'rocm_wheel(name="wheel")\n',
        "rules/BUILD": 'pex_binary(\n    name="update-pins",\n    entry_point="rocm_build/programs/update_pins.py:main",\n)\n',
        "rules/rocm_build/programs/update_pins.py": PROGRAM,
        "rules/rocm_build/goals/plan.py": GOAL,
        "tests/BUILD": "",
        "bench/run.py": "",
    })  # fmt: skip
    assert check(tmp_path) == [
        "README.md:4: link 'docs/gone.md': docs/gone.md does not exist",  # a link may wrap
        "docs/orphan.md: not linked from README.md (its table of pages)",
        "docs/pins.md:5: link '#moving': pins.md has no heading with the anchor #moving",
        "docs/pins.md:8: `./pants rocm-plan --frobnicate components/vllm:whee`: --frobnicate is not an option of `rocm-plan` (rules/rocm_build/goals/)",
        "docs/pins.md:8: `./pants rocm-plan --frobnicate components/vllm:whee`: components/vllm:whee: components/vllm/BUILD declares no target named 'whee'",
        "docs/pins.md:9: `./pants packgae components/nothere:wheel`: `packgae` is not a goal (Pants': check, dependencies, dependents, "
        "export, filedeps, fmt, generate-lockfiles, help, lint, list, package, paths, peek, repl, roots, run, tailor, test, version; ours: rocm-plan)",
        "docs/pins.md:9: `./pants packgae components/nothere:wheel`: components/nothere:wheel: components/nothere/BUILD does not exist",
        "docs/pins.md:10: `./pants run rules:update-pins -- --only vllm --dry-rum`: --dry-rum is not a flag of rules:update-pins",
        "docs/pins.md:11: `./pants --pants-config-files=pants.remote.toml test tests::`: pants.remote.toml does not exist",
        "docs/pins.md:12: `python3 bench/run.py && tests/mini/make_upstreams.py`: tests/mini/make_upstreams.py does not exist",
    ]
