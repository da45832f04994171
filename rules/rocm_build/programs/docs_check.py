"""Checks the pages a user reads (README.md, docs/*.md, components/README.md) against the tree.

- Every relative link resolves: the file exists and, with `#anchor`, the page has that heading
  (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
- Every docs page is linked from README.md.
- Every command a page shows in a code block is one this repository can run as written: for
  `./pants`, each goal exists (Pants' own or one of ours, `rules/rocm_build/goals/`), each option
  of our goals is one they define, each target address is declared in its BUILD file, each file
  an option names exists, and each `--flag` after `--` of `pants run rules:<tool>` is one the
  tool's program parses; scripts (`./setup`, `tests/mini/make_upstreams.py`,
  `python3 bench/run.py`) exist; a repository path a command names exists.

Usage: python docs_check.py [ROOT]   (prints one line per problem; exit 1 if any)
Standard library only.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Set

PAGES = ("README.md", "docs/*.md", "components/README.md")
# The Pants goals the pages may use that Pants itself defines (2.17; the same names in 2.31).
PANTS_GOALS = {
    "check", "dependencies", "dependents", "export", "filedeps", "fmt", "generate-lockfiles",
    "help", "lint", "list", "package", "paths", "peek", "repl", "roots", "run", "tailor", "test", "version",
}  # fmt: skip
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
ADDRESS = re.compile(r"^(//)?([A-Za-z0-9_./-]*)(::?)([A-Za-z0-9_.-]*)(@\S+)?$")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
# A word of a command that names a file of this repository (a top-level directory first).
TOP_DIRS = ("3rdparty/", "bench/", "components/", "docs/", "patches/", "rules/", "tests/")


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    words: List[str]


def anchor(heading: str) -> str:
    text = heading.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> Set[str]:
    found = set()
    for line in _prose(page.read_text().splitlines()):
        match = HEADING.match(line)
        if match:
            found.add(anchor(match.group(1)))
    return found


def _prose(lines: List[str]) -> Iterator[str]:
    fenced = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield line


def pages(root: Path) -> List[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern) if p.is_file()})


def link_problems(root: Path, page: Path) -> List[str]:
    problems = []
    name = page.relative_to(root)
    text = page.read_text()
    for match in LINK.finditer(text):  # over the whole text: a link's words may wrap
        target, number = match.group(1), text.count("\n", 0, match.start(1)) + 1
        if re.match(r"^[a-z]+:", target):
            continue  # https://, mailto:
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        where = f"{name}:{number}: link {target!r}"
        if not linked.exists():
            problems.append(f"{where}: {linked.relative_to(root.resolve()) if _inside(linked, root) else linked} does not exist")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            problems.append(f"{where}: {linked.name} has no heading with the anchor #{fragment}")
    return problems


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root.resolve())
        return True
    except ValueError:
        return False


def commands(root: Path, page: Path) -> Iterator[Command]:
    """Lines of code blocks (fenced or indented) that run something of this repository."""
    lines = page.read_text().splitlines()
    fenced = False
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        indented = line.startswith("    ") and (number == 1 or not lines[number - 2].strip() or lines[number - 2].startswith("    "))
        if not (fenced or indented):
            continue
        words = _words(line)
        while words and ENV_ASSIGNMENT.match(words[0]):
            words = words[1:]
        if words and _runs_something(words):
            yield Command(str(page.relative_to(root)), number, words)


def _runs_something(words: List[str]) -> bool:
    """`./pants ...`, `./setup`, `python3 bench/run.py`, `tests/mini/make_upstreams.py`: not a
    line of output or of a config file shown in the same block."""
    if words[0] in ("./pants", "pants", "./setup"):
        return True
    if words[0] in ("python3", "python"):
        return len(words) > 1 and words[1].endswith(".py")
    return words[0].startswith(TOP_DIRS) and words[0].endswith((".py", ".sh"))


def _words(line: str) -> List[str]:
    code = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
    try:
        return shlex.split(code)
    except ValueError:
        return code.split()


def command_problems(root: Path, command: Command) -> List[str]:
    where = f"{command.page}:{command.line}: `{' '.join(command.words)}`"
    problems: List[str] = []
    for part in _and_list(command.words):
        if part[0] in ("./pants", "pants"):
            problems += pants_problems(root, part[1:])
        elif part[0] in ("python3", "python"):
            problems += _path_problems(root, part[1:2])
        else:
            problems += _path_problems(root, [part[0]])
    return [f"{where}: {p}" for p in problems]


def _and_list(words: List[str]) -> Iterator[List[str]]:
    part: List[str] = []
    for word in words + ["&&"]:
        if word == "&&":
            if part:
                yield part
            part = []
        else:
            part.append(word)


def _path_problems(root: Path, words: List[str]) -> List[str]:
    return [f"{w} does not exist" for w in words if "..." not in w and not (root / w).exists()]


def pants_problems(root: Path, words: List[str]) -> List[str]:
    """The words after `./pants`: global options, the goal, its options, addresses, `-- args`."""
    args: List[str] = []
    if "--" in words:
        words, args = words[: words.index("--")], words[words.index("--") + 1 :]
    ours = our_goals(root)
    known = PANTS_GOALS | ours
    bare = [w for w in words if not w.startswith("-") and ":" not in w and "/" not in w and "..." not in w]
    # The first bare word is the goal; later ones are more goals, or the values of options.
    goals = [w for i, w in enumerate(bare) if i == 0 or w in known]
    problems = [f"`{g}` is not a goal (Pants': {', '.join(sorted(PANTS_GOALS))}; ours: {', '.join(sorted(ours))})" for g in goals if g not in known]
    current = ""  # the goal the words after it belong to; "" before any (global options)
    for word in words:
        if word in goals:
            current = word
        elif word.startswith("-"):
            problems += _option_problems(root, word, current, ours)
        elif ":" in word:
            problems += address_problems(root, word)
    if args and goals == ["run"]:
        problems += _program_flag_problems(root, [w for w in words if ":" in w], args)
    return problems


def _option_problems(root: Path, option: str, goal: str, ours: Set[str]) -> List[str]:
    """An option after one of our goals must be one it declares; a global one is Pants'."""
    name, _, value = option.partition("=")
    if name == "--pants-config-files":
        return _path_problems(root, [value])
    if goal in ours and name not in goal_flags(goal_source(root, goal)):
        return [f"{name} is not an option of `{goal}` (rules/rocm_build/goals/)"]
    return []


def goal_flags(source: str) -> Set[str]:
    """The flags a goal's subsystem declares: `check = BoolOption(...)` is --check (and --no-check)."""
    flags = set()
    for attribute, kind in re.findall(r"^\s+(\w+) = (\w*)Option\(", source, re.M):
        flag = attribute.replace("_", "-")
        flags.update({f"--{flag}", f"--no-{flag}"} if kind == "Bool" else {f"--{flag}"})
    return flags


def our_goals(root: Path) -> Set[str]:
    found = set()
    for source in (root / "rules/rocm_build/goals").glob("*.py"):
        found.update(re.findall(r'^\s+name = "([a-z-]+)"', source.read_text(), re.M))
    return found


def goal_source(root: Path, goal: str) -> str:
    for source in (root / "rules/rocm_build/goals").glob("*.py"):
        text = source.read_text()
        if re.search(rf'^\s+name = "{re.escape(goal)}"', text, re.M):
            return text
    return ""


def address_problems(root: Path, spec: str) -> List[str]:
    match = ADDRESS.match(spec)
    if not match:
        return [f"{spec} is not a target address"]
    directory, colons, name = match.group(2), match.group(3), match.group(4)
    if colons == "::":
        return [] if (root / directory).is_dir() else [f"{spec}: no directory {directory or '.'}"]
    build = root / directory / "BUILD"
    if not build.is_file():
        return [f"{spec}: {build.relative_to(root)} does not exist"]
    if name and not re.search(rf'\bname\s*=\s*"{re.escape(name)}"', build.read_text()):
        return [f"{spec}: {build.relative_to(root)} declares no target named {name!r}"]
    return []


def _program_flag_problems(root: Path, tools: List[str], args: List[str]) -> List[str]:
    problems = []
    for tool in tools:
        source = _program_source(root, tool)
        if source is None:
            problems.append(f"{tool}: no pex_binary with an entry_point in its BUILD")
            continue
        problems += [f"{flag} is not a flag of {tool}" for flag in args if flag.startswith("--") and f'"{flag.split("=")[0]}"' not in source]
    return problems


def _program_source(root: Path, tool: str) -> Optional[str]:
    match = ADDRESS.match(tool)
    if not match or not (root / match.group(2) / "BUILD").is_file():
        return None
    build = (root / match.group(2) / "BUILD").read_text()
    found = re.search(rf'name="{re.escape(match.group(4))}",\s*entry_point="([^":]+)', build)
    if not found:
        return None
    main = root / match.group(2) / found.group(1)
    # The entry point and the modules beside it (update-pins parses its flags in a sibling).
    return "\n".join(p.read_text() for p in sorted(main.parent.glob("*.py")) if not p.name.endswith("_test.py"))


def check(root: Path) -> List[str]:
    problems: List[str] = []
    readme = (root / "README.md").read_text()
    for page in pages(root):
        problems += link_problems(root, page)
        for command in commands(root, page):
            problems += command_problems(root, command)
        rel = str(page.relative_to(root))
        if rel.startswith("docs/") and f"({rel})" not in readme:
            problems.append(f"{rel}: not linked from README.md (its table of pages)")
    return problems


def main() -> int:
    problems = check(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
