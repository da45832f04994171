"""Downloads an archive, verifies its sha256 and unpacks it into `archive/`.

Usage: fetch_archive.py SHA256 STRIP_PREFIX URL [MIRROR...]
Exit 20: the bytes do not match SHA256 (stderr: `got sha256:<hex> from <url>`); nothing is
unpacked. Exit 21: no URL could be downloaded. Exit 22: the archive is unreadable, has a
member outside its root, or lacks STRIP_PREFIX.
"""

import hashlib
import os
import shutil
import ssl
import sys
import tarfile
import urllib.request
import zipfile

DOWNLOAD = "download.part"
OUT = "archive"


def download(url):
    context = ssl.create_default_context(cafile=os.environ.get("ROCM_BUILD_CA_CERTS") or None)
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60, context=context) as response, open(DOWNLOAD, "wb") as out:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def members(path):
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                yield info.filename, info.is_dir(), lambda info=info, zf=zf: zf.read(info), 0o644
        return
    with tarfile.open(path, "r:*") as tf:
        for info in tf:
            if info.issym() or info.islnk():
                yield info.name, False, ("link", info.linkname, info.issym()), info.mode
            elif info.isdir() or info.isfile():
                yield info.name, info.isdir(), (lambda info=info, tf=tf: tf.extractfile(info).read()), info.mode


def unpack(path, strip_prefix):
    prefix = strip_prefix.strip("/") + "/" if strip_prefix else ""
    seen_prefix = False
    for name, is_dir, data, mode in members(path):
        name = name[2:] if name.startswith("./") else name
        if prefix:
            if not (name + "/").startswith(prefix):
                continue
            seen_prefix = True
            name = name[len(prefix):]
        if not name:
            continue
        if name.startswith("/") or ".." in name.split("/"):
            sys.exit(f"member {name!r} points outside the archive root")
        target = os.path.join(OUT, name)
        if is_dir:
            os.makedirs(target, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        if isinstance(data, tuple):
            _, link, symbolic = data
            if symbolic:
                os.symlink(link, target)
            else:
                shutil.copyfile(os.path.join(OUT, link[len(prefix):]), target)
            continue
        with open(target, "wb") as f:
            f.write(data())
        os.chmod(target, 0o755 if mode & 0o111 else 0o644)
    if prefix and not seen_prefix:
        sys.exit(f"no member starts with strip_prefix {strip_prefix!r}")


def main():
    sha256, strip_prefix, *urls = sys.argv[1:]
    errors = []
    for url in urls:
        try:
            got = download(url)
        except Exception as e:  # noqa: BLE001 - every failure means: try the next mirror
            errors.append(f"{url}: {e}")
            continue
        if got != sha256:
            print(f"got sha256:{got} from {url}", file=sys.stderr)
            os.remove(DOWNLOAD)
            sys.exit(20)
        os.makedirs(OUT)
        try:
            unpack(DOWNLOAD, strip_prefix)
        except SystemExit as e:
            print(e.code, file=sys.stderr)
            sys.exit(22)
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
            print(f"cannot unpack {url}: {e}", file=sys.stderr)
            sys.exit(22)
        os.remove(DOWNLOAD)
        return
    print("\n".join(errors), file=sys.stderr)
    sys.exit(21)


if __name__ == "__main__":
    main()
