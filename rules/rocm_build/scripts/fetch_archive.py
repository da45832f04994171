"""Downloads an archive, verifies its sha256 and unpacks it into `archive/`.

Usage: fetch_archive.py SHA256 STRIP_PREFIX URL [MIRROR...]
Writes the tree to `archive/` and, to `newest_mtime`, the newest modification time (seconds
since the epoch) of the members it unpacked: an archive's own date, as a commit has its
committer date (a build from the archive takes it as SOURCE_DATE_EPOCH).
Exit 20: the bytes do not match SHA256 (stderr: `got sha256:<hex> from <url>`); nothing is
unpacked. Exit 21: no URL could be downloaded. Exit 22: the archive is unreadable, lacks
STRIP_PREFIX, or has a member we refuse (stderr: `refused member '<name>': <reason>`).

An archive is upstream's bytes, unpacked on the host before any build sandbox: every member
is checked before anything is created for it, so nothing lands outside `archive/`, not even
part of a file. Refused: absolute names, `..` components, links that resolve outside the
tree (also through a link unpacked earlier), device files, FIFOs, setuid/setgid bits.
"""

import calendar
import hashlib
import os
import shutil
import ssl
import stat
import sys
import tarfile
import urllib.request
import zipfile

DOWNLOAD = "download.part"
OUT = "archive"
NEWEST = "newest_mtime"
EXIT_MISMATCH, EXIT_DOWNLOAD, EXIT_UNPACK = 20, 21, 22


class Refused(Exception):
    """Why the archive is not unpacked; for a member: names it and says why."""


def refuse(name, reason):
    raise Refused(f"refused member {name!r}: {reason}")


def download(url):
    context = ssl.create_default_context(cafile=os.environ.get("ROCM_BUILD_CA_CERTS") or None)
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60, context=context) as response, open(DOWNLOAD, "wb") as out:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _zip_members(zf):
    for info in zf.infolist():
        mode = info.external_attr >> 16 if info.create_system == 3 else 0
        kind = stat.S_IFMT(mode)
        mtime = calendar.timegm((*info.date_time, 0, 0, 0))  # zip stores local time; read as UTC
        if info.is_dir() or kind == stat.S_IFDIR:
            yield info.filename, "dir", None, mode, mtime
        elif kind == stat.S_IFLNK:
            yield info.filename, "symlink", zf.read(info).decode("utf-8", "surrogateescape"), mode, mtime
        elif kind in (0, stat.S_IFREG):
            yield info.filename, "file", lambda info=info: zf.open(info), mode, mtime
        else:
            yield info.filename, "special", None, mode, mtime


def _tar_members(tf):
    for info in tf:
        mtime = int(info.mtime)
        if info.isdir():
            yield info.name, "dir", None, info.mode, mtime
        elif info.isfile():
            yield info.name, "file", lambda info=info: tf.extractfile(info), info.mode, mtime
        elif info.issym():
            yield info.name, "symlink", info.linkname, info.mode, mtime
        elif info.islnk():
            yield info.name, "hardlink", info.linkname, info.mode, mtime
        else:  # character or block device, FIFO
            yield info.name, "special", None, info.mode, mtime


def members(path):
    """(name, kind, data, mode, mtime): data opens a file's bytes, or is a link's target."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            yield from _zip_members(zf)
        return
    with tarfile.open(path, "r:*") as tf:
        yield from _tar_members(tf)


def check_name(name):
    """A member name that stays inside the tree whatever it is joined to."""
    if name.startswith("/"):
        refuse(name, "it has an absolute path")
    if ".." in name.split("/"):
        refuse(name, "it has a `..` component, which leads outside the unpacked tree")


def check_mode(name, kind, mode):
    if kind == "special":
        refuse(name, "it is a device file or a FIFO")
    # Modes are never applied (files get 0644 or 0755), but a setuid file in a source archive
    # means something is wrong with it; a setgid directory is only how it was packed.
    if kind != "dir" and mode & (stat.S_ISUID | stat.S_ISGID):
        refuse(name, "it has the setuid or setgid bit set")


def inside(root, path):
    """Whether `path` resolves, following every link on its way as the kernel would now, to
    `root` or below it."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def check_resolves_inside(root, name, path, what):
    if not inside(root, path):
        refuse(name, f"{what} resolves outside the unpacked tree")


def _strip(name, prefix):
    """The name below STRIP_PREFIX, "" for the prefix itself, None for a member outside it."""
    name = name[2:] if name.startswith("./") else name
    if not prefix:
        return name
    return name[len(prefix):] if (name + "/").startswith(prefix) else None


def _replace_non_dir(path):
    """A later member replaces an earlier one of the same name (as tar does); never write
    through a link left there."""
    if os.path.lexists(path) and not (os.path.isdir(path) and not os.path.islink(path)):
        os.remove(path)


def unpack_member(root, name, kind, data, mode, prefix):
    """Checks and creates one member; `name` is below STRIP_PREFIX, messages name it in full."""
    shown, target = prefix + name, os.path.join(root, name)
    # Whatever the member is, its directory must be inside the tree as it stands now: this is
    # what refuses `a/passwd` after a link `a` whose meaning changed since it was unpacked.
    check_resolves_inside(root, shown, os.path.dirname(target), "its directory")
    if kind == "dir":
        check_resolves_inside(root, shown, target, "the directory")
        os.makedirs(target, exist_ok=True)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    _replace_non_dir(target)
    if kind == "symlink":
        if data.startswith("/"):
            refuse(shown, f"it is a symbolic link to the absolute path {data!r}")
        check_resolves_inside(root, shown, os.path.join(os.path.dirname(target), data), f"its link target {data!r}")
        os.symlink(data, target)
        return
    if kind == "hardlink":  # tar names the earlier member the link shares its data with
        source = _strip(data, prefix)
        if data.startswith("/") or ".." in data.split("/") or not source:
            refuse(shown, f"it is a hard link to {data!r}, outside the unpacked tree")
        check_resolves_inside(root, shown, os.path.join(root, source), f"its hard link target {data!r}")
        content = open(os.path.join(root, source), "rb")
        mode = os.stat(os.path.join(root, source)).st_mode
    else:
        content = data()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with content, os.fdopen(fd, "wb") as f:
        shutil.copyfileobj(content, f, 1 << 20)
    os.chmod(target, 0o755 if mode & 0o111 else 0o644)


def check_links_at_end(root, prefix):
    """A link checked when it was unpacked can point elsewhere once later members exist
    (`l -> x/y/../..`, then `x -> .`): every link must still resolve inside."""
    for top, dirs, files in os.walk(root):
        for entry in dirs + files:
            path = os.path.join(top, entry)
            if os.path.islink(path):
                name = prefix + os.path.relpath(path, root)
                check_resolves_inside(root, name, path, f"its link target {os.readlink(path)!r}")


def unpack(path, strip_prefix):
    """Unpacks the archive into OUT; returns the newest mtime of the members unpacked."""
    root = os.path.realpath(OUT)
    prefix = strip_prefix.strip("/") + "/" if strip_prefix else ""
    seen_prefix = False
    newest = 0
    for raw_name, kind, data, mode, mtime in members(path):
        # Every member is checked, also those outside STRIP_PREFIX: a hostile one is a
        # reason to distrust the whole archive.
        check_name(raw_name)
        check_mode(raw_name, kind, mode)
        name = _strip(raw_name, prefix)
        if name is None:
            continue
        seen_prefix = True
        if name.strip("/"):
            unpack_member(root, name.rstrip("/"), kind, data, mode, prefix)
            newest = max(newest, mtime)
    check_links_at_end(root, prefix)
    if prefix and not seen_prefix:
        raise Refused(f"no member starts with strip_prefix {strip_prefix!r}")
    return newest


def mirrored(urls):
    """The URLs with `[rocm-build] mirrors` applied (scripts/mirrors.py); the bytes are still
    checked against the pin's sha256, so a mirror can only serve the pinned file."""
    import mirrors

    table = mirrors.load_here()
    return [mirrors.rewrite(url, table)[0] for url in urls]


def main():
    sha256, strip_prefix, *urls = sys.argv[1:]
    errors = []
    for url in mirrored(urls):
        try:
            got = download(url)
        except Exception as e:  # noqa: BLE001 - every failure means: try the next mirror
            errors.append(f"{url}: {e}")
            continue
        if got != sha256:
            print(f"got sha256:{got} from {url}", file=sys.stderr)
            os.remove(DOWNLOAD)
            sys.exit(EXIT_MISMATCH)
        os.makedirs(OUT)
        try:
            newest = unpack(DOWNLOAD, strip_prefix)
        except Refused as e:
            print(e, file=sys.stderr)
            sys.exit(EXIT_UNPACK)
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
            print(f"cannot unpack {url}: {e}", file=sys.stderr)
            sys.exit(EXIT_UNPACK)
        os.remove(DOWNLOAD)
        with open(NEWEST, "w") as f:
            f.write(f"{newest}\n")
        return
    print("\n".join(errors), file=sys.stderr)
    sys.exit(EXIT_DOWNLOAD)


if __name__ == "__main__":
    main()
