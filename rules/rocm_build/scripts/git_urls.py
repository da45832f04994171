"""Which git URLs we hand to git: an upstream is untrusted input until its build is sandboxed.

A URL reaches git from a pin (ours), a mirror setting (ours) or an upstream's own
`.gitmodules` (theirs). Git reads some URLs as commands or options: `ext::sh -c ...` runs a
command, `--upload-pack=...` is an option, `ssh://-oProxyCommand=...` is one for ssh. Git
refuses some of these in its own submodule code (CVE-2017-1000117, CVE-2018-17456); we fetch
submodules ourselves, so we check every URL here before any git process sees it.

Allowed: https, ssh (`ssh://` or scp-like `user@host:path`), and `file://` only where the
pin's own URL is a file URL (fixture repositories of tests, local mirrors). Never: plain
http or git:// (unauthenticated), remote helpers (`<name>::`), a leading `-` in the URL, its
host or user, spaces or control characters, or a password in the URL.

Stdlib only: also runs in process sandboxes (scripts/source_pack.py) and is loaded by the
plugin as the module rocm_build.scripts.git_urls, the same file, so both check alike.
"""

import re
import urllib.parse

NETWORK_SCHEMES = ("https", "ssh")
SSH_ALIASES = {"git+ssh": "ssh", "ssh+git": "ssh"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HELPER = re.compile(r"^([A-Za-z0-9][A-Za-z0-9+.-]*)::")
_SCP = re.compile(r"^(?:([^@/]*)@)?([^:/]+):(.*)$")


def schemes_for(pin_url):
    """The schemes a pin's fetches may use: file only when the pin itself is a file URL."""
    return NETWORK_SCHEMES + (("file",) if scheme_of(pin_url) == "file" else ())


def scheme_of(url):
    m = _SCHEME.match(url)
    if m:
        scheme = m.group(1).lower()
        return SSH_ALIASES.get(scheme, scheme)
    return "ssh" if _SCP.match(url) else None


def git_protocol_allow(schemes):
    """GIT_ALLOW_PROTOCOL for the schemes: git's own last line, for whatever we missed."""
    return ":".join(sorted(set(schemes)))


def redact(url):
    """The URL without a password or token (`user:secret@` -> `user:***@`), for messages."""
    return re.sub(r"(://[^/@:\s]*):[^/@\s]*@", r"\1:***@", url)


def refusal(url, schemes):
    """Why git must not be given `url`, or None when it may."""
    if not isinstance(url, str) or not url:
        return "is empty"
    if url.startswith("-"):
        return "starts with `-`, which git would read as an option"
    helper = _HELPER.match(url)
    if helper:
        return f"names the remote helper `{helper.group(1)}::`, which runs a program instead of fetching"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "contains a control character (a newline or similar), which git config and git's transports misread"
    if any(c.isspace() for c in url):
        return "contains a space"
    m = _SCHEME.match(url)
    if m:
        return _refuse_url(url, scheme_of(url), schemes)
    scp = _SCP.match(url)
    if scp and "/" not in url.split(":", 1)[0]:
        user, host, path = scp.groups()
        if "ssh" not in schemes:
            return "is an ssh (scp-like) URL, which is not allowed here"
        for part, what in ((host, "host"), (user or "", "user"), (path, "path")):
            if part.startswith("-"):
                return f"has a {what} that starts with `-`, which ssh would read as an option"
        return None
    return "is a local path; write it as file:///absolute/path (allowed only for file:// pins)"


def _refuse_url(url, scheme, schemes):
    if scheme not in schemes:
        allowed = ", ".join(f"{s}://" for s in schemes)
        why = "" if scheme != "file" else " (file:// is allowed only where the pin's own URL is file://)"
        if scheme in ("http", "git"):
            why = " (unencrypted and unauthenticated)"
        return f"uses the scheme `{scheme}://`, which is not allowed here{why}; allowed: {allowed}"
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None:
        return (
            "carries a password or token, which would reach logs and cache keys; give credentials "
            "outside the pins (a git credential helper, an ssh key, a netrc file)"
        )
    if scheme != "file":
        if not parts.hostname:
            return "has no host"
        for part, what in ((parts.hostname, "host"), (parts.username or "", "user")):
            if part.startswith("-"):
                return f"has a {what} that starts with `-`, which ssh would read as an option"
    elif parts.netloc not in ("", "localhost"):
        return "is a file:// URL with a host; write file:///absolute/path"
    return None


def resolve(parent, url):
    """A submodule URL as git resolves it: `./x` and `../x` relative to the parent's URL,
    never climbing above its host (or its root for file:// URLs)."""
    if not url.startswith(("./", "../")):
        return url
    base = parent.rstrip("/")
    scp_style = _SCHEME.match(base) is None and ":" in base.split("/", 1)[0]  # git@host:org/repo
    root = len(_SCHEME.match(base).group(0)) if _SCHEME.match(base) else 0
    while url.startswith(("./", "../")):
        if url.startswith("../"):
            if "/" in base[root:]:
                base = base.rsplit("/", 1)[0]
            elif scp_style:  # git@host:repo + ../x is git@host:x
                return f"{base.split(':', 1)[0]}:{url.split('/', 1)[1]}"
        url = url.split("/", 1)[1]
    return f"{base}/{url}"
