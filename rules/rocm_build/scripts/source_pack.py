"""A pinned source tree as one git pack: fetched without a working tree, checked out where needed.

Usage: source_pack.py fetch URL SHA SUBMODULES(0|1) OUT
         writes OUT/objects.pack + OUT/objects.idx (every object of the commit's tree and of
         its submodules' trees, recursively), OUT/repos ("<commit> <path>" per repository,
         the top one first, at ".") and ./commit_time (the commit's committer time)
       source_pack.py checkout PACK DEST [--only PATH... | --except PATH... | --read PATH...]
         writes the tree of PACK (made by `fetch`) at DEST: all of it, only the entries at
         the given paths (files or symbolic links), or all but them; with --read, each path's
         content as a regular file, symbolic links on the way followed (inside the tree), and
         prints {"path": "the file it named"} as JSON
       source_pack.py pack TREE EPOCH OUT
         writes the files under TREE (an unpacked archive) as one commit, dated EPOCH, its
         author and message fixed, in a pack like `fetch`'s (OUT/objects.*, OUT/repos,
         ./commit_time = EPOCH): the same files and EPOCH give the same commit anywhere, and
         an archive is a source tree like a fetched commit (checked out, patched, built)

Why a pack: a PyTorch-sized tree is 100k files. Captured by Pants after the fetch and written
again into each build's sandbox, it cost ~20 s each time on our machines, where git checks the
same tree out in 2 s. As a pack it is a few files in Pants' store, the same bytes on every
machine for the same commits and git (one thread, no delta search: nothing depends on timing).

Exit codes of `fetch`: 10 the commit could not be fetched, 11 the server sent another commit,
12 a submodule could not be fetched, 14 a URL was refused before git saw it (git_urls.py; the
last line of stderr is {"refused": {"path", "url", "why"}} as JSON); of both, 13 an unexpected
git failure. Runs inside Pants sandboxes with the host's git.

Every git process gets GIT_ALLOW_PROTOCOL for the pin's schemes only, and `--` before URLs:
an upstream's `.gitmodules` is not trusted, and this runs on the host before any sandbox.
"""

import contextlib
import json
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile

GITLINK = "160000"
SYMLINK = "120000"
# The time of every file a checkout writes: older than any output of a build, so a build tool
# that compares times rebuilds nothing for a file a kept build directory was built from
# (kept_build_dir.py gives changed files the current time).
UNCHANGED = 946684800  # 2000-01-01T00:00:00Z
LINKS_FOLLOWED = 40  # as Linux's limit: a cycle of links ends in "not found"
# The exit codes the docstring lists (EXIT_GIT: of both commands); upstream/fetch.py reads them here.
EXIT_FETCH, EXIT_MISMATCH, EXIT_SUBMODULES, EXIT_GIT, EXIT_REFUSED = 10, 11, 12, 13, 14
# The schemes this run's git may use: none until `fetch` allows what its pin allows (checkouts
# read only the local pack).
ALLOWED = {"GIT_ALLOW_PROTOCOL": "none"}


def git(*args, git_dir, stdin=None, env=None, check=True):
    run = subprocess.run(
        # No automatic gc: a detached repack would race the next fetch and our cleanup.
        ["git", "--git-dir", git_dir, "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args],
        input=stdin, capture_output=True, env={**os.environ, **ALLOWED, **(env or {})},
    )
    if check and run.returncode != 0:
        sys.stderr.write(run.stderr.decode(errors="replace"))
        print(f"`git {args[0]}` failed (exit {run.returncode})", file=sys.stderr)
        sys.exit(EXIT_GIT)
    return run


def refuse(git_urls, path, url, why):
    print(f"the URL of `{path}` ({git_urls.redact(url)}) {why}; nothing was fetched from it", file=sys.stderr)
    print(json.dumps({"refused": {"path": path, "url": git_urls.redact(url), "why": why}}), file=sys.stderr)
    sys.exit(EXIT_REFUSED)


def fetch_commit(git_dir, url, sha):
    return git("fetch", "-q", "--depth", "1", "--no-tags", "--", url, sha, git_dir=git_dir, check=False)


def submodules_of(git_dir, commit):
    """(path, commit, url) of each submodule the commit's tree records, from its .gitmodules,
    but those marked `update = none` there: `git submodule update` leaves them empty too."""
    links = [
        (path, sha)
        for mode, _, rest in (line.split(" ", 2) for line in
                              git("ls-tree", "-r", "-z", commit, git_dir=git_dir).stdout.decode().split("\0") if line)
        for sha, path in [rest.split("\t", 1)]
        if mode == GITLINK
    ]
    if not links:
        return []
    config = git("config", "--blob", f"{commit}:.gitmodules", "-z", "--get-regexp",
                 r"^submodule\..*\.(path|url|update)$", git_dir=git_dir, check=False).stdout.decode()
    fields = {"path": {}, "url": {}, "update": {}}
    for entry in filter(None, config.split("\0")):
        key, value = entry.split("\n", 1)
        name, field = key[len("submodule."):].rsplit(".", 1)
        fields[field][name] = value
    url_of = {path: fields["url"].get(name) for name, path in fields["path"].items()}
    skipped = {path for name, path in fields["path"].items() if fields["update"].get(name) == "none"}
    found = []
    for path, sha in links:
        if path in skipped:
            continue
        if path.startswith("/") or {"..", ".git", ""} & set(path.split("/")):
            print(f"the submodule path `{path}` in {commit} leaves the tree or names .git", file=sys.stderr)
            sys.exit(EXIT_SUBMODULES)
        if not url_of.get(path):
            print(f"no URL for the submodule at `{path}` in .gitmodules of {commit}", file=sys.stderr)
            sys.exit(EXIT_SUBMODULES)
        found.append((path, sha, url_of[path]))
    return found


def fetch_through_mirrors(git_dir, url, sha, table):
    """Fetches `sha` from the mirror of `url` if the table has one (scripts/mirrors.py), else
    from `url`; the commit is checked either way."""
    import mirrors

    fetched_from, mirror = mirrors.rewrite(url, table)
    run = fetch_commit(git_dir, fetched_from, sha)
    if mirror and run.returncode != 0:
        print(f"(fetched through the mirror {mirror}: {fetched_from})", file=sys.stderr)
    return run


def fetch(url, sha, submodules, out, mirrors_dir=".mirrors"):
    import git_urls  # beside this script in fetch processes only; checkouts do without it
    import mirrors

    schemes = git_urls.schemes_for(url)
    table = mirrors.load(mirrors_dir)
    # Mirrors are our setting, so their schemes are allowed for the fetches they serve.
    used = {git_urls.scheme_of(mirror) for _, mirror in table}
    ALLOWED["GIT_ALLOW_PROTOCOL"] = git_urls.git_protocol_allow([*schemes, *used])
    why = git_urls.refusal(url, schemes)
    if why:
        refuse(git_urls, ".", url, why)
    git_dir = tempfile.mkdtemp(prefix=".fetch-git-", dir=".")
    subprocess.run(["git", "init", "-q", "--bare", "--", git_dir], check=True)
    run = fetch_through_mirrors(git_dir, url, sha, table)
    sys.stderr.write(run.stderr.decode(errors="replace"))
    if run.returncode != 0:
        sys.exit(EXIT_FETCH)
    got = git("rev-parse", "FETCH_HEAD", git_dir=git_dir).stdout.decode().strip()
    if got != sha:
        print(f"fetched {got} instead of {sha}", file=sys.stderr)
        sys.exit(EXIT_MISMATCH)
    repos = [(".", sha)]
    pending = [(".", sha, url)] if submodules else []
    while pending:
        prefix, commit, parent_url = pending.pop(0)
        for path, sub_sha, sub_url in submodules_of(git_dir, commit):
            where = path if prefix == "." else f"{prefix}/{path}"
            sub_url = git_urls.resolve(parent_url, sub_url)
            why = git_urls.refusal(sub_url, schemes)
            if why:
                refuse(git_urls, where, sub_url, why)
            run = fetch_through_mirrors(git_dir, sub_url, sub_sha, table)
            if run.returncode != 0:
                sys.stderr.write(run.stderr.decode(errors="replace"))
                print(f"submodule `{where}`: cannot fetch {sub_sha} from {git_urls.redact(sub_url)}", file=sys.stderr)
                sys.exit(EXIT_SUBMODULES)
            repos.append((where, sub_sha))
            pending.append((where, sub_sha, sub_url))
    write_pack(git_dir, repos, out)
    with open("commit_time", "w") as f:
        f.write(git("log", "-1", "--format=%ct", sha, "--", git_dir=git_dir).stdout.decode())
    shutil.rmtree(git_dir)


def write_pack(git_dir, repos, out):
    """OUT/objects.{pack,idx} with the commits of `repos` ((path, commit), the top one first)
    and their trees, and OUT/repos."""
    commits = "".join(f"{c}\n" for _, c in repos).encode()
    # The commits and their trees only: a shallow commit's parents are not there to walk.
    objects = git("rev-list", "--objects", "--no-walk", "--stdin", git_dir=git_dir, stdin=commits).stdout
    os.makedirs(out)
    # Objects recompressed, never the server's deltas or compressed bytes reused: the same
    # commits give the same pack whatever server or packing sent them.
    name = git("-c", "pack.writeReverseIndex=false", "pack-objects", "-q", "--threads=1", "--window=0",
               "--no-reuse-delta", "--no-reuse-object",
               os.path.join(out, "objects"), git_dir=git_dir, stdin=objects).stdout.decode().strip()
    for ext in ("pack", "idx"):
        os.rename(os.path.join(out, f"objects-{name}.{ext}"), os.path.join(out, f"objects.{ext}"))
    with open(os.path.join(out, "repos"), "w") as f:
        f.writelines(f"{commit} {path}\n" for path, commit in repos)


# Who and what an archive's commit says it is: fixed, so its SHA is the files' and the date's.
ARCHIVE_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "rocm-build", "GIT_AUTHOR_EMAIL": "rocm-build@localhost",
    "GIT_COMMITTER_NAME": "rocm-build", "GIT_COMMITTER_EMAIL": "rocm-build@localhost",
}  # fmt: skip


def pack_tree(tree, epoch, out):
    """An unpacked archive as a one-commit pack. Every file is added, also those a
    `.gitignore` in the archive names (-f): the archive's content is the source."""
    git_dir = tempfile.mkdtemp(prefix=".pack-git-", dir=".")
    subprocess.run(["git", "init", "-q", "--bare", "--", git_dir], check=True)
    work = {"GIT_WORK_TREE": os.path.abspath(tree), "GIT_INDEX_FILE": os.path.join(os.path.abspath(git_dir), "index")}
    git("-c", "core.autocrlf=false", "-c", "core.fileMode=true", "-c", "core.symlinks=true", "add", "-A", "-f", ".",
        git_dir=git_dir, env=work)
    tree_sha = git("write-tree", git_dir=git_dir, env=work).stdout.decode().strip()
    date = {"GIT_AUTHOR_DATE": f"@{epoch} +0000", "GIT_COMMITTER_DATE": f"@{epoch} +0000"}
    commit = git("commit-tree", tree_sha, "-m", "the unpacked archive", git_dir=git_dir,
                 env={**ARCHIVE_COMMIT_ENV, **date}).stdout.decode().strip()
    write_pack(git_dir, [(".", commit)], out)
    with open("commit_time", "w") as f:
        f.write(f"{int(epoch)}\n")
    shutil.rmtree(git_dir)


def read_repos(pack):
    with open(os.path.join(pack, "repos")) as f:
        return [tuple(reversed(line.split(" ", 1))) for line in f.read().splitlines() if line]


def entries(git_dir, env):
    """Paths of the index (read-tree'd), without gitlinks: a submodule is its own repository."""
    listed = git("ls-files", "-s", "-z", git_dir=git_dir, env=env).stdout.decode().split("\0")
    return [rest.split("\t", 1)[1] for rest in listed if rest and not rest.startswith(GITLINK)]


@contextlib.contextmanager
def pack_repository(pack, where):
    """A temporary bare repository in the directory `where` whose objects are the pack's
    (linked, not copied), removed when the block ends."""
    git_dir = tempfile.mkdtemp(prefix=".source-git-", dir=where)
    try:
        subprocess.run(["git", "init", "-q", "--bare", "--", git_dir], check=True)
        for ext in ("pack", "idx"):
            os.symlink(os.path.join(os.path.realpath(pack), f"objects.{ext}"), os.path.join(git_dir, "objects", "pack", f"pack-source.{ext}"))
        yield git_dir
    finally:
        shutil.rmtree(git_dir)


def checkout(pack, dest, only=None, excluded=()):
    pack, dest = os.path.realpath(pack), os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    with pack_repository(pack, os.path.dirname(dest)) as git_dir:
        index = {"GIT_INDEX_FILE": os.path.join(git_dir, "index"), "GIT_WORK_TREE": dest}
        for path, commit in read_repos(pack):
            work_tree = dest if path == "." else os.path.join(dest, path)
            prefix = "" if path == "." else f"{path}/"
            git("read-tree", commit, git_dir=git_dir, env=index)
            if only is None and not excluded:
                wanted = None
            else:
                wanted = [p for p in entries(git_dir, index)
                          if ((prefix + p) in only if only is not None else (prefix + p) not in excluded)]
                if not wanted:
                    continue
            os.makedirs(work_tree, exist_ok=True)
            write = ["-c", "checkout.workers=0", "checkout-index", "-f", *(["-a"] if wanted is None else ["-z", "--stdin"])]
            git(*write, git_dir=git_dir, env={**index, "GIT_WORK_TREE": work_tree},
                stdin=None if wanted is None else "".join(f"{p}\0" for p in wanted).encode())
            for p in entries(git_dir, index) if wanted is None else wanted:
                os.utime(os.path.join(work_tree, p), ns=(UNCHANGED * 10**9,) * 2, follow_symlinks=False)


def tree_entries(git_dir, pack):
    """{path: (mode, object)} of every file and symbolic link of the tree, submodules' included."""
    found = {}
    for path, commit in read_repos(pack):
        prefix = "" if path == "." else f"{path}/"
        for line in git("ls-tree", "-r", "-z", commit, git_dir=git_dir).stdout.decode().split("\0"):
            if line and not line.startswith(GITLINK):
                mode, _, rest = line.split(" ", 2)
                sha, name = rest.split("\t", 1)
                found[prefix + name] = (mode, sha)
    return found


def resolve(entries, path, link_target):
    """The path of the file `path` names, following symbolic links on the way; None when it
    names nothing, a directory, or leaves the tree (an absolute link, or one out of the top)."""
    parts = path.split("/")
    for _ in range(LINKS_FOLLOWED):
        for i in range(1, len(parts) + 1):
            here = "/".join(parts[:i])
            mode, sha = entries.get(here, (None, None))
            if mode == SYMLINK:
                target = link_target(sha)
                followed = posixpath.normpath(posixpath.join(posixpath.dirname(here), target, *parts[i:]))
                if target.startswith("/") or followed == ".." or followed.startswith("../"):
                    return None
                parts = followed.split("/")
                break
            if mode is not None:
                return here if i == len(parts) else None
        else:
            return None
    return None


def read(pack, dest, paths):
    """Each path's content at DEST/path, links followed; returns {path: the file it named}."""
    pack, dest = os.path.realpath(pack), os.path.abspath(dest)
    os.makedirs(dest, exist_ok=True)
    with pack_repository(pack, os.path.dirname(dest)) as git_dir:
        entries = tree_entries(git_dir, pack)

        def blob(sha):
            return git("cat-file", "blob", sha, git_dir=git_dir).stdout

        named = {}
        for path in paths:
            found = resolve(entries, path, lambda sha: blob(sha).decode(errors="replace"))
            if found is None:
                continue
            named[path] = found
            out = os.path.join(dest, path)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(blob(entries[found][1]))
            os.chmod(out, 0o755 if entries[found][0] == "100755" else 0o644)
        return named


def main(argv):
    if argv[:1] == ["fetch"] and len(argv) == 5:
        fetch(argv[1], argv[2], argv[3] == "1", argv[4])
    elif argv[:1] == ["pack"] and len(argv) == 4:
        pack_tree(argv[1], argv[2], argv[3])
    elif argv[:1] == ["checkout"] and len(argv) >= 3:
        paths = set(argv[4:])
        if argv[3:4] == ["--only"]:
            checkout(argv[1], argv[2], only=paths)
        elif argv[3:4] == ["--except"]:
            checkout(argv[1], argv[2], excluded=paths)
        elif argv[3:4] == ["--read"]:
            print(json.dumps(read(argv[1], argv[2], sorted(paths)), sort_keys=True))
        else:
            checkout(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
