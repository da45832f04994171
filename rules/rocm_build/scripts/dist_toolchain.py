"""The build's toolchain as an archive for sccache-dist's build servers.

A build server runs each compile in a sandbox whose root is the toolchain archive the client
sent: the compiler and everything it runs and loads, nothing of the server's own system. So
every server compiles with exactly the build's compiler. sccache can pack a compiler itself,
but it leaves out what clang runs for HIP (clang-offload-bundler, and llvm-objcopy, which the
bundler calls), and then the remote compile fails instead of falling back.

The toolchain root goes to /toolchain in the archive, whatever its path on this machine (so
the archive, a build input, has no machine path in it); libraries from outside the root stay
at the path the loader found them. Members are sorted and their times, owners and gzip header
fixed: the same toolchain gives the same bytes on every machine.

Usage:
  dist_toolchain.py pack ROOT COMPILER OUT_DIR
      ROOT: the toolchain root (a link is followed); COMPILER: clang's path under it
      (bin/clang, lib/llvm/bin/clang). Writes OUT_DIR/toolchain.tar.gz and
      OUT_DIR/toolchain.json: {"archive", "compilers": {path in the build: path in the
      archive}, "files", "bytes"}.
"""

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile

IN_ARCHIVE = "/toolchain"
BUILD_DIR = "/mnt/rocm-build"  # where builds run (build_wheel.sh's fixed path)
# What clang runs beside itself for C, C++ and HIP objects (clang++ is clang by another name).
TOOLS = ("clang", "clang++", "clang-offload-bundler", "clang-offload-packager", "llvm-objcopy", "lld", "ld.lld")
COMPILERS = ("clang", "clang++")


def elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def libraries(path):
    """What the loader maps for `path`, as `ldd` finds them, the loader itself among them."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1 and words[words.index("=>") + 1].startswith("/"):
            found.append(words[words.index("=>") + 1])
        elif words and words[0].startswith("/"):
            found.append(words[0])
    return found


def collect(root, compiler):
    """{path in the archive: (path on this machine, or None for a link, link target or None)}."""
    real_root = os.path.realpath(root)
    members = {}

    def place(path):
        path = os.path.normpath(path)
        for prefix in (real_root, os.path.normpath(root)):
            if path == prefix or path.startswith(prefix + "/"):
                return IN_ARCHIVE + path[len(prefix):]
        return path

    def add_file(path):
        members.setdefault(place(path), (os.path.realpath(path), None))

    bin_dir = os.path.dirname(os.path.join(real_root, compiler))
    for name in TOOLS:
        path = os.path.join(bin_dir, name)
        if not os.path.exists(path):
            continue
        if os.path.islink(path) and os.path.dirname(os.path.realpath(path)) == bin_dir:
            members[place(path)] = (None, os.path.basename(os.path.realpath(path)))
            path = os.path.realpath(path)
        add_file(path)
        if elf(os.path.realpath(path)):
            for lib in libraries(path):
                add_file(lib)
    resource = subprocess.run([os.path.join(bin_dir, "clang"), "-print-resource-dir"], capture_output=True, text=True,
                              check=True).stdout.strip()
    # Its headers (a HIP compile's wrappers include them) and the device bitcode of a ROCm root.
    trees = [os.path.join(resource, "include")]
    trees += [os.path.join(real_root, d) for d in ("amdgcn/bitcode", "lib/llvm/amdgcn/bitcode", "lib/amdgcn/bitcode")]
    for tree in filter(os.path.isdir, trees):
        for top, _, files in os.walk(tree):
            for name in files:
                add_file(os.path.join(top, name))
    return members


def write_archive(members, out):
    """A gzipped tar with fixed times, owners and order; returns its size."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        # The compile's own sandbox on a server has only what the archive holds: clang puts a
        # HIP compile's intermediate files in /tmp ("unable to make temporary file" without it).
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode, tmp.mtime = tarfile.DIRTYPE, 0o1777, 0
        tar.addfile(tmp)
        for name in sorted(members):
            source, link = members[name]
            info = tarfile.TarInfo(name.lstrip("/"))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if link is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
                tar.addfile(info)
                continue
            info.size = os.path.getsize(source)
            info.mode = 0o755 if os.access(source, os.X_OK) else 0o644
            with open(source, "rb") as f:
                tar.addfile(info, f)
    with open(out, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=6) as z:
        z.write(raw.getvalue())
    return os.path.getsize(out)


def pack(root, compiler, out_dir):
    members = collect(root, compiler)
    os.makedirs(out_dir, exist_ok=True)
    size = write_archive(members, os.path.join(out_dir, "toolchain.tar.gz"))
    bin_rel = os.path.dirname(compiler)
    compilers = {
        f"{BUILD_DIR}/.rocm/root/{bin_rel}/{name}": f"{IN_ARCHIVE}/{bin_rel}/{name}"
        for name in COMPILERS
        if f"{IN_ARCHIVE}/{bin_rel}/{name}" in members
    }
    with open(os.path.join(out_dir, "toolchain.json"), "w") as f:
        json.dump({"archive": "toolchain.tar.gz", "compilers": compilers, "files": len(members), "bytes": size}, f,
                  indent=1, sort_keys=True)
    return 0


def main(argv):
    if argv[1:2] == ["pack"] and len(argv) == 5:
        return pack(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
