"""Runs the upstream's own PEP 517 metadata hook, as pip would before building, and says how it went.

Usage: metadata_hook.py OUT_JSON   (in the project directory, with the build venv's Python)

The preflight (upstream_steps.py) runs it through build_wheel.sh, so it sees the build's venv,
environment and network namespace, before any build step: what fails here (a version lookup
that needs `.git`, a build requirement missing from the lock) would fail the build the same
way, hours later. The backend is the one `pyproject.toml` names in [build-system], else
setuptools' legacy backend over `setup.py` (as pip does). Always exits 0: OUT_JSON says
{"file", "backend", "ok", "name", "version", "requires_dist", "unmet_requires", "missing_module",
"needs_git", "git_said", "tail"}; `requires_dist` holds the Requires-Dist lines that apply here
(their markers true for this interpreter and platform, no extras): what the built wheel will
ask of the install set. A failure is the preflight's to explain, and a finished run is cached.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata

LEGACY = "setuptools.build_meta:__legacy__"
TIMEOUT = 600
TAIL = 12
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
# setuptools-scm without .git (LookupError), and what `git describe` says in a tree without one.
NEEDS_GIT = re.compile(r"setuptools-scm was unable to detect version|fatal: not a git repository", re.I)

# The child: the hook in a process of its own, so an upstream's sys.exit or crash is reported.
CHILD = """
import importlib, sys
backend, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:0] = [p for p in path.split(":") if p]
module, _, attr = backend.partition(":")
hooks = importlib.import_module(module)
for part in filter(None, attr.split(".")):
    hooks = getattr(hooks, part)
hook = getattr(hooks, "prepare_metadata_for_build_wheel", None)
print("rocm_build-dist-info:" + (hook(out) if hook else ""))
"""


def build_system():
    """(file, backend, backend-path, requires) as pip reads them."""
    if not os.path.exists("pyproject.toml"):
        return "setup.py", LEGACY, [], []
    with open("pyproject.toml", "rb") as f:
        text = f.read()
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:
            tomllib = None
    table = tomllib.loads(text.decode()).get("build-system", {}) if tomllib else _build_system_by_hand(text.decode())
    if "build-backend" not in table:
        return ("pyproject.toml" if table else "setup.py"), LEGACY, [], list(table.get("requires", []))
    return "pyproject.toml", table["build-backend"], list(table.get("backend-path", [])), list(table.get("requires", []))


def _build_system_by_hand(text):
    """The [build-system] table without a TOML parser (Python < 3.11 without tomli)."""
    section = re.search(r"^\[build-system\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not section:
        return {}
    body, table = section.group(1), {}
    backend = re.search(r"^build-backend\s*=\s*[\"']([^\"']+)[\"']", body, re.M)
    if backend:
        table["build-backend"] = backend.group(1)
    for key in ("requires", "backend-path"):
        found = re.search(rf"^{key}\s*=\s*\[(.*?)\]", body, re.M | re.S)
        if found:
            table[key] = [a or b for a, b in re.findall(r"\"([^\"]*)\"|'([^']*)'", found.group(1))]
    return table


def unmet(requires):
    """Build-system requirements the venv does not satisfy: [{"requirement", "name", "installed"}]."""
    try:
        from pip._vendor.packaging.requirements import Requirement  # pip is in every build venv
    except ImportError:
        Requirement = None
    found = []
    for line in requires:
        match = NAME.match(line.split(";")[0])
        if not match:
            continue
        try:
            installed = metadata.version(match.group(1))
        except metadata.PackageNotFoundError:
            installed = None
        if installed is not None and Requirement is not None:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate():
                continue
            if requirement.specifier.contains(installed, prereleases=True):
                continue
        elif installed is not None:
            continue
        found.append({"requirement": line, "name": match.group(1), "installed": installed})
    return found


def read_metadata(path):
    """(Name, Version, the Requires-Dist lines whose markers hold here without extras)."""
    with open(os.path.join(path, "METADATA"), encoding="utf-8", errors="replace") as f:
        headers = [line.split(": ", 1) for line in f.read().split("\n\n", 1)[0].splitlines() if ": " in line]
    fields = dict(headers)
    return fields.get("Name"), fields.get("Version"), [v for k, v in headers if k == "Requires-Dist" and applies(v)]


def applies(requirement):
    try:
        from pip._vendor.packaging.requirements import Requirement  # pip is in every build venv
    except ImportError:
        return ";" not in requirement
    try:
        marker = Requirement(requirement).marker
        return marker is None or marker.evaluate({"extra": ""})
    except Exception:  # a line pip itself could not read: reported as it is
        return True


def main(out_json):
    file, backend, backend_path, requires = build_system()
    result = {"file": file, "backend": backend, "ok": False, "name": None, "version": None, "requires_dist": [],
              "unmet_requires": unmet(requires), "missing_module": None, "needs_git": False, "tail": []}
    with tempfile.TemporaryDirectory() as out:
        try:
            run = subprocess.run([sys.executable, "-c", CHILD, backend, ":".join(backend_path), out],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
            output, code = run.stdout.decode(errors="replace"), run.returncode
        except subprocess.TimeoutExpired as e:
            output, code = (e.output or b"").decode(errors="replace") + f"\n(stopped after {TIMEOUT} s)", -1
        sys.stdout.write(output)
        lines = [line for line in output.splitlines() if line.strip()]
        dist_info = [line.split(":", 1)[1] for line in lines if line.startswith("rocm_build-dist-info:")]
        if code == 0 and dist_info and dist_info[-1]:
            result["ok"] = True
            result["name"], result["version"], result["requires_dist"] = read_metadata(os.path.join(out, dist_info[-1]))
        elif code == 0:
            result["ok"] = True  # a backend without the optional hook: imported, nothing more to ask
        modules = MISSING_MODULE.findall(output)
        result["missing_module"] = modules[-1] if modules and not result["ok"] else None
        said = [line.strip() for line in lines if NEEDS_GIT.search(line)]
        result["needs_git"] = bool(said) and not result["ok"]
        result["git_said"] = said[0] if result["needs_git"] else None
        result["tail"] = [line for line in lines if not line.startswith("rocm_build-dist-info:")][-TAIL:]
    with open(out_json, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(f"== metadata hook of {file} ({backend}): {'ok' if result['ok'] else 'failed'}")


if __name__ == "__main__":
    main(sys.argv[1])
