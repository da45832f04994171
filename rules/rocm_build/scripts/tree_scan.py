"""Scans a patched upstream tree for what its build would download, and the torch/triton it names.

Usage: tree_scan.py PACK CHANGES TOUCHED   (prints JSON)
  PACK     the fetched pack (source_pack.py); the tree is read out of it, never checked out
  CHANGES  the files our patches wrote, at their tree paths
  TOUCHED  a file listing every path the patches touched, one a line (deleted ones are gone)

What it reads, to stay fast on a 100k-file tree (the listing is one `git ls-tree`, the files
one `git cat-file --batch`): every CMakeLists.txt and *.cmake, every setup.py, the *.py at
the top level and in top-level build directories (tools/, build_tools/, cmake/, scripts/,
build/, setup/), pyproject.toml and requirements*.txt at the top and requirements/**/*.txt;
nothing under docs/, examples/, docker/ or CI directories (no build runs them). Cargo: every
Cargo.lock is read, and every Cargo.toml is listed (crates vendored in the tree, beside a
.cargo-checksum.json, are not builds).

It reports (JSON): `downloads`, each {"file", "line", "what", "text"}: CMake
FetchContent_Declare / ExternalProject_Add with a URL or repository, file(DOWNLOAD, git clone,
pip install; in Python urllib/urlretrieve/urlopen, requests, pip install, git clone, curl,
wget. `env_vars`: for each file with a download, the environment variables it reads (the
upstream's override switches). `versions`, each {"file", "line", "name", "version", "text"}:
vLLM-style `TORCH_SUPPORTED_VERSION_ROCM "X"` and `torch==X` / `triton==X` pins in
requirement files, pyproject.toml and setup.py (files named for another device left out).
`cargo`: {"locks": [{"file", "registries": {source: crates}, "git": [{"line", "source"}]}],
"unlocked": [Cargo.toml with no Cargo.lock in its directory or above]}: what cargo would fetch
at build time (each git source once, at its first line).
"""

import json
import os
import posixpath
import re
import subprocess
import sys

SKIP_DIRS = {"docs", "doc", "examples", "docker", ".github", ".gitlab", ".ci", ".circleci"}
BUILD_DIRS = {"tools", "build_tools", "cmake", "scripts", "build", "setup"}
OTHER_DEVICES = re.compile(r"cuda|cpu|tpu|xpu|hpu|neuron|cu\d{2,3}", re.I)

CMAKE_CALLS = re.compile(r"\b(FetchContent_Declare|ExternalProject_Add)\s*\(", re.I)
CMAKE_FETCHES = re.compile(r"\b(URL|GIT_REPOSITORY|SVN_REPOSITORY|HG_REPOSITORY|DOWNLOAD_COMMAND)\b")
CMAKE_LINES = [
    ("file(DOWNLOAD", re.compile(r"\bfile\s*\(\s*DOWNLOAD\b", re.I)),
    ("git clone", re.compile(r"(?:\bgit\b|GIT_EXECUTABLE\})[^#\n]*\bclone\b")),
    ("pip install", re.compile(r"\bpip3?\b[^#\n]*\binstall\b")),
]
PYTHON_LINES = [
    ("urllib", re.compile(r"\burlretrieve\s*\(|\burlopen\s*\(")),
    ("requests", re.compile(r"\brequests\.(?:get|post|request|Session)\s*\(")),
    # A command as an argv list ("pip", "install") or a string that starts with it: not prose
    # that mentions it ("... or git clone").
    ("pip install", re.compile(r"[\"']pip3?[\"']\s*,\s*(?:[\"']-[^\"']*[\"']\s*,\s*)*[\"']install[\"']|[\"'](?:\S+\s+-m\s+)?pip3?\s+install\b")),
    ("git clone", re.compile(r"[\"']git[\"']\s*,\s*(?:[\"']-[^\"']*[\"']\s*,\s*)*[\"']clone[\"']|[\"']git\s+(?:-\S+\s+)*clone\b")),
    ("curl/wget", re.compile(r"[\"'](?:curl|wget)[\"']|\b(?:curl|wget)\s+-")),
]
ENV_VARS = re.compile(r"ENV\{(\w+)\}|environ(?:\.get)?\s*[\(\[]\s*[\"'](\w+)[\"']|getenv\s*\(\s*[\"'](\w+)[\"']")
TORCH_CMAKE = re.compile(r"\bTORCH_SUPPORTED_VERSION_ROCM\s+\"([^\"]+)\"")
PINNED = re.compile(r"(?<![\w.-])(torch|triton)\s*==\s*([0-9][^\s\"',;]*)")
# A [[package]]'s origin in a Cargo.lock, as cargo writes it (workspace members have none).
CARGO_SOURCE = re.compile(r'^source = "((?:registry|sparse|git)\+[^"]+)"$')
CARGO_LOCK, CARGO_MANIFEST, VENDORED_CRATE = "Cargo.lock", "Cargo.toml", ".cargo-checksum.json"


def kind(path):
    parts = path.split("/")
    if SKIP_DIRS.intersection(parts[:-1]):
        return None
    name = parts[-1]
    if name == CARGO_LOCK:
        return "cargo"
    if name == "CMakeLists.txt" or name.endswith(".cmake"):
        return "cmake"
    if name == "setup.py" or (name.endswith(".py") and (len(parts) == 1 or (len(parts) == 2 and parts[0] in BUILD_DIRS))):
        return "python"
    if len(parts) == 1 and (name == "pyproject.toml" or (name.startswith("requirements") and name.endswith(".txt"))):
        return "requirements"
    if parts[0] == "requirements" and name.endswith(".txt"):
        return "requirements"
    return None


def lines_of(text):
    return text.splitlines()


def line_at(text, offset):
    return text.count("\n", 0, offset) + 1


def cmake_call_args(text, start):
    """The text of a CMake call's arguments, from its opening parenthesis to the matching one."""
    depth, i = 0, start
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return text[start:]


def uncommented(text, comment="#"):
    """Each line without its comment, offsets kept (a `#` inside quotes is rare in these files)."""
    return "\n".join(line.split(comment, 1)[0] for line in text.split("\n"))


def downloads(path, how, text):
    found = []
    lines = lines_of(text)
    if how == "cmake":
        code = uncommented(text)
        for call in CMAKE_CALLS.finditer(code):
            if CMAKE_FETCHES.search(cmake_call_args(code, call.end() - 1)):
                n = line_at(code, call.start())
                found.append((n, call.group(1)))
        for n, line in enumerate(code.split("\n"), 1):
            found += [(n, what) for what, pattern in CMAKE_LINES if pattern.search(line)]
    elif how == "python":
        for n, line in enumerate(lines, 1):
            stripped = line.strip()
            if stripped.startswith(("#", "import ", "from ")):
                continue
            found += [(n, what) for what, pattern in PYTHON_LINES if pattern.search(line)]
    return [{"file": path, "line": n, "what": what, "text": lines[n - 1].strip()[:200]} for n, what in sorted(set(found))]


def versions(path, how, text):
    found = []
    for n, line in enumerate(lines_of(text), 1):
        if line.strip().startswith("#"):
            continue
        if how == "cmake":
            found += [(n, "torch", m.group(1), line) for m in TORCH_CMAKE.finditer(line)]
        elif not OTHER_DEVICES.search(path.rsplit("/", 1)[-1]):
            found += [(n, m.group(1), m.group(2), line) for m in PINNED.finditer(line)]
    return [{"file": path, "line": n, "name": name, "version": v, "text": line.strip()[:200]} for n, name, v, line in found]


def cargo_lock(path, text):
    """What a Cargo.lock has cargo fetch: crates per registry, and each git source at its first line."""
    registries, git = {}, {}
    for n, line in enumerate(lines_of(text), 1):
        m = CARGO_SOURCE.match(line.strip())
        if not m:
            continue
        source = m.group(1)
        if source.startswith("git+"):
            git.setdefault(source, n)
        else:
            registries[source] = registries.get(source, 0) + 1
    return {"file": path, "registries": registries, "git": [{"line": n, "source": s} for s, n in git.items()]}


def vendored(path, paths):
    """A file of a crate vendored into the tree (`cargo vendor` writes a .cargo-checksum.json beside its Cargo.toml)."""
    return posixpath.join(posixpath.dirname(path), VENDORED_CRATE) in paths


def unlocked_manifests(paths):
    """Cargo.toml files with no Cargo.lock in their directory or any above it (a workspace
    member's lock is at the workspace root), vendored crates left out."""
    def skipped(path):
        return SKIP_DIRS.intersection(path.split("/")[:-1]) or vendored(path, paths)

    locked = {posixpath.dirname(p) for p in paths if posixpath.basename(p) == CARGO_LOCK and not skipped(p)}
    found = []
    for path in sorted(p for p in paths if posixpath.basename(p) == CARGO_MANIFEST and not skipped(p)):
        directory = posixpath.dirname(path)
        while directory not in locked and directory:
            directory = posixpath.dirname(directory)
        if directory not in locked:
            found.append(path)
    return found


def blobs(git_dir, shas):
    """The content of each blob, by one `git cat-file --batch`."""
    run = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"], input="".join(f"{s}\n" for s in shas).encode(),
                         capture_output=True, check=True)
    out, pos, found = run.stdout, 0, {}
    for sha in shas:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        found[sha] = out[header_end + 1 : header_end + 1 + size]
        pos = header_end + 1 + size + 1
    return found


def tree_files(pack, changes, touched):
    """({path: bytes} of the files worth scanning in the patched tree, every path of it)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import source_pack  # beside this script in the sandbox

    with source_pack.pack_repository(pack, ".") as git_dir:
        entries = source_pack.tree_entries(git_dir, pack)
        wanted = {p: sha for p, (mode, sha) in entries.items() if mode != source_pack.SYMLINK and p not in touched and kind(p)}
        contents = blobs(git_dir, sorted(set(wanted.values())))
    files = {p: contents[sha] for p, sha in wanted.items()}
    paths = {p for p in entries if p not in touched}
    for root, _, names in os.walk(changes):
        for name in names:
            path = os.path.relpath(os.path.join(root, name), changes)
            paths.add(path)
            if kind(path):
                with open(os.path.join(root, name), "rb") as f:
                    files[path] = f.read()
    return files, paths


def main(pack, changes, touched_file):
    with open(touched_file) as f:
        touched = set(f.read().splitlines())
    files, paths = tree_files(pack, changes, touched)
    cargo = {"locks": [], "unlocked": unlocked_manifests(paths)}
    result = {"files_scanned": len(files), "downloads": [], "env_vars": {}, "versions": [], "cargo": cargo}
    for path in sorted(files):
        how = kind(path)
        text = files[path].decode(errors="replace")
        if how == "cargo":
            if not vendored(path, paths):
                cargo["locks"].append(cargo_lock(path, text))
            continue
        hits = downloads(path, how, text)
        if hits:
            result["downloads"] += hits
            result["env_vars"][path] = sorted({next(v for v in m if v) for m in ENV_VARS.findall(text)})
        result["versions"] += versions(path, how, text)
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    main(*sys.argv[1:4])
