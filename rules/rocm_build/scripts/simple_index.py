"""A package index's files for one project (PEP 503 HTML or PEP 691 JSON), and a pinned
wheel downloaded from it and checked against its sha256. Standard library only: it runs in
a process sandbox, and update-pins imports it.

Usage: simple_index.py fetch INDEX_URL PROJECT FILE SHA256
Writes wheel/FILE. Exit 20: the bytes do not match SHA256 (stderr: `got sha256:<hex>`);
21: the index or the file could not be downloaded; 23: the index does not list FILE;
24: the file is not a wheel we install (stderr: `refused <FILE>: ...`, naming the member).

The sha256 says the bytes are the pinned ones, not that they are a sound wheel: pip installs
a wheel's members without checking them against its RECORD. So a wheel is refused unless
every member has a safe name (relative, no `..`, no backslash), is no link, device or
setuid file, and is in its own `*.dist-info/RECORD` with the same hash and size.
"""

import base64
import csv
import hashlib
import html.parser
import io
import json
import os
import re
import ssl
import stat
import sys
import urllib.parse
import urllib.request
import zipfile
import zlib

EXIT_MISMATCH, EXIT_DOWNLOAD, EXIT_NOT_LISTED, EXIT_REFUSED = 20, 21, 23, 24
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def project_url(index_url, project):
    return index_url.rstrip("/") + "/" + re.sub(r"[-_.]+", "-", project).lower() + "/"


def _mirrored(url):
    """`[rocm-build] mirrors` applied, in a fetch process's sandbox (scripts/mirrors.py beside
    this script); unchanged where there is no table. Files are still checked by sha256."""
    try:
        import mirrors
    except ImportError:  # loaded by the plugin (update-pins), not in a sandbox
        return url
    return mirrors.rewrite(url, mirrors.load_here())[0]


def _open(url, accept=None):
    url = _mirrored(url)
    if url.startswith("file:") and url.endswith("/"):
        url += "index.html"  # a local index is a directory tree (`pip download` + an index page each)
    context = ssl.create_default_context(cafile=os.environ.get("ROCM_BUILD_CA_CERTS") or None)
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    return urllib.request.urlopen(request, timeout=60, context=context)


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append(dict(attrs))


def project_files(index_url, project):
    """[(file name, absolute URL, sha256 or None, metadata URL or None)] the index lists."""
    url = project_url(index_url, project)
    with _open(url, f"{JSON_TYPE}, text/html;q=0.1") as response:
        kind, body = response.headers.get("Content-Type", ""), response.read()
    try:
        return _listed(url, kind, body.decode())
    except (ValueError, LookupError, TypeError, AttributeError, AssertionError, NotImplementedError) as e:
        # What an index serves is not ours: a page we cannot read is an unusable index (an
        # OSError, as for one we cannot reach), never a traceback. (html.parser raises
        # NotImplementedError or AssertionError, by Python version, on a bad marked section.)
        raise OSError(f"{url} is not a package index page we can read ({type(e).__name__}: {e})") from e


def _listed(url, kind, body):
    found = []
    if kind.startswith(JSON_TYPE):
        for f in json.loads(body)["files"]:
            metadata = f.get("core-metadata") or f.get("dist-info-metadata")
            found.append((f["filename"], urllib.parse.urljoin(url, f["url"]), f.get("hashes", {}).get("sha256"),
                          urllib.parse.urljoin(url, f["url"]) + ".metadata" if metadata else None))
        return found
    parser = _Links()
    parser.feed(body)
    for attrs in parser.links:
        href = urllib.parse.urljoin(url, attrs.get("href", ""))
        clean, _, fragment = href.partition("#")
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        has_metadata = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")
        found.append((urllib.parse.unquote(clean.rsplit("/", 1)[-1]), clean, sha, clean + ".metadata" if has_metadata else None))
    return found


def download(url, path):
    digest = hashlib.sha256()
    with _open(url) as response, open(path, "wb") as out:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


RECORD_HASHES = ("sha256", "sha384", "sha512")  # what PEP 427 allows: sha256 or stronger
SIGNATURES = ("RECORD.jws", "RECORD.p7s")  # signatures of RECORD, which RECORD cannot list
WHEEL_NAME = re.compile(r"^[^./\\][^/\\]*\.whl$")


def _name_problem(name):
    if "\\" in name:
        return "has a backslash in its name (a path separator on Windows)"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "has an absolute path"
    if ".." in name.split("/"):
        return "has a `..` component, which leads outside the install directory"
    return None


def _mode_problem(info):
    mode = info.external_attr >> 16 if info.create_system == 3 else 0
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "is a device file, FIFO or socket"
    if mode & (stat.S_ISUID | stat.S_ISGID):
        return "has the setuid or setgid bit set"
    return None


class _Refused(Exception):
    """Why a wheel is refused, naming the member."""


def _record(zf, names):
    """The wheel's RECORD as {path: (hash, size)}, and its name."""
    records = [n for n in names if re.match(r"^[^/]+\.dist-info/RECORD$", n)]
    if len(records) != 1:
        raise _Refused(f"has {len(records) or 'no'} *.dist-info/RECORD at its top; a wheel has exactly one")
    rows = {}
    for row in csv.reader(io.TextIOWrapper(zf.open(records[0]), encoding="utf-8", newline="")):
        if row and not row[0].endswith("/"):
            path, digest, size = (row + ["", ""])[:3]
            rows[path] = (digest, size)
    return rows, records[0]


def _check_hash(zf, info, digest, size, record):
    algorithm, _, expected = digest.partition("=")
    if algorithm not in RECORD_HASHES:
        raise _Refused(f"member {info.filename!r} has no sha256 (or stronger) hash in {record} (it says {digest!r})")
    hasher, length = hashlib.new(algorithm), 0
    with zf.open(info) as member:  # members of GPU wheels reach gigabytes: never read one whole
        for chunk in iter(lambda: member.read(1 << 20), b""):
            hasher.update(chunk)
            length += len(chunk)
    got = base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode()
    # PEP 376 says urlsafe base64; some wheels on PyPI (gmsh 4.15.2) write hex: as strong a check.
    if expected not in (got, hasher.hexdigest()):
        raise _Refused(f"member {info.filename!r} has {algorithm}={got}, but {record} says {digest}")
    if size and size != str(length):
        raise _Refused(f"member {info.filename!r} is {length} bytes, but {record} says {size}")


def _check_wheel(zf):
    infos, seen = zf.infolist(), set()
    for info in infos:
        problem = _name_problem(info.filename) or _mode_problem(info)
        if problem:
            raise _Refused(f"member {info.filename!r} {problem}")
        if info.filename in seen:  # which copy would an installer take, which did RECORD hash?
            raise _Refused(f"member {info.filename!r} is in the wheel twice")
        seen.add(info.filename)
    rows, record = _record(zf, [i.filename for i in infos])
    unlisted = {record, *(record[: -len("RECORD")] + s for s in SIGNATURES)}
    for info in infos:
        if info.is_dir() or info.filename in unlisted:
            continue
        if info.filename not in rows:
            raise _Refused(f"member {info.filename!r} is not listed in {record}")
        _check_hash(zf, info, *rows.pop(info.filename), record)
    rows.pop(record, None)
    if rows:
        raise _Refused(f"{record} lists {sorted(rows)[0]!r}, which is not in the wheel")


def wheel_problem(path):
    """Why the wheel at `path` must not be installed, naming the member; None if it is sound."""
    try:
        with zipfile.ZipFile(path) as zf:
            _check_wheel(zf)
    except _Refused as e:
        return str(e)
    except (zipfile.BadZipFile, zlib.error, EOFError, UnicodeDecodeError, csv.Error, OSError, NotImplementedError, RuntimeError) as e:
        return f"is not a readable wheel: {e}"
    return None


def url_problem(index_url, file_url):
    """Why the index's link to a file must not be followed: only a file:// index (tests, a
    local mirror) may send us to a local file; any index only to http(s) otherwise (a mirror's
    page may link to itself over loopback http; the bytes are checked by sha256 anyway)."""
    scheme, index_scheme = urllib.parse.urlsplit(file_url).scheme, urllib.parse.urlsplit(index_url).scheme
    allowed = {"https", "http", index_scheme}
    if scheme in allowed:
        return None
    return f"the index links it to {file_url!r}; an {index_scheme} index may link only to {' or '.join(sorted(allowed))} URLs"


def fetch(index_url, project, file_name, sha256):
    if not WHEEL_NAME.match(file_name):
        print(f"refused {file_name}: not a wheel's file name (no `/`, `\\` or leading `.`, ends in .whl)", file=sys.stderr)
        return EXIT_REFUSED
    try:
        listed = {name: url for name, url, _, _ in project_files(index_url, project)}
    except OSError as e:
        print(f"cannot read {project_url(index_url, project)}: {e}", file=sys.stderr)
        return EXIT_DOWNLOAD
    if file_name not in listed:
        print(f"{project_url(index_url, project)} does not list {file_name}", file=sys.stderr)
        return EXIT_NOT_LISTED
    # A mirror is ours (a setting): the page it serves may link to local files.
    problem = url_problem(_mirrored(project_url(index_url, project)), listed[file_name])
    if problem:
        print(f"refused {file_name}: {problem}", file=sys.stderr)
        return EXIT_REFUSED
    os.makedirs("wheel", exist_ok=True)
    part = os.path.join("wheel", file_name + ".part")
    try:
        got = download(listed[file_name], part)
    except OSError as e:
        print(f"cannot download {listed[file_name]}: {e}", file=sys.stderr)
        return EXIT_DOWNLOAD
    if got != sha256:
        os.remove(part)
        print(f"got sha256:{got} from {listed[file_name]}", file=sys.stderr)
        return EXIT_MISMATCH
    problem = wheel_problem(part)
    if problem:
        os.remove(part)
        print(f"refused {file_name}: {problem}", file=sys.stderr)
        return EXIT_REFUSED
    os.replace(part, os.path.join("wheel", file_name))
    return 0


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    sys.exit({"fetch": fetch}[command](*args))
