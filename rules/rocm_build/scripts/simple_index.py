"""A package index's files for one project (PEP 503 HTML or PEP 691 JSON), and a pinned
wheel downloaded from it and checked against its sha256. Standard library only: it runs in
a process sandbox, and update-pins imports it.

Usage: simple_index.py fetch INDEX_URL PROJECT FILE SHA256
Writes wheel/FILE. Exit 20: the bytes do not match SHA256 (stderr: `got sha256:<hex>`);
21: the index or the file could not be downloaded; 23: the index does not list FILE.
"""

import hashlib
import html.parser
import json
import os
import re
import ssl
import sys
import urllib.parse
import urllib.request

EXIT_MISMATCH, EXIT_DOWNLOAD, EXIT_NOT_LISTED = 20, 21, 23
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def project_url(index_url, project):
    return index_url.rstrip("/") + "/" + re.sub(r"[-_.]+", "-", project).lower() + "/"


def _open(url, accept=None):
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
        kind, body = response.headers.get("Content-Type", ""), response.read().decode()
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


def fetch(index_url, project, file_name, sha256):
    try:
        listed = {name: url for name, url, _, _ in project_files(index_url, project)}
    except OSError as e:
        print(f"cannot read {project_url(index_url, project)}: {e}", file=sys.stderr)
        return EXIT_DOWNLOAD
    if file_name not in listed:
        print(f"{project_url(index_url, project)} does not list {file_name}", file=sys.stderr)
        return EXIT_NOT_LISTED
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
    os.replace(part, os.path.join("wheel", file_name))
    return 0


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    sys.exit({"fetch": fetch}[command](*args))
