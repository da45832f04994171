"""sccache-dist for builds that have no network: the farm's scheduler and build servers, relayed.

sccache's server inside the build is the distributed client: it asks the scheduler for a
build server, fetches that server's certificate from the scheduler, then sends the job to the
server over TLS. A build has only its own loopback, so sccache's server (and nothing else in
the build) is given an HTTP proxy there; the proxy passes each connection through a Unix
socket in the sandbox (sockets cross network namespaces) to the forwarder outside, which lets
through only:
- requests to the scheduler of the settings, one a connection (sccache sends `Connection:
  close`); over TLS when its URL is https, so the build speaks plain HTTP to the forwarder;
- tunnels (CONNECT) to a build server the scheduler has vouched for to this build: one whose
  certificate the scheduler served (`GET /api/v1/scheduler/server_certificate/ADDR`, 200),
  which sccache asks before it sends a job to a server new to it.
Anything else is refused (403). A scheduler or server that cannot be reached is a 502: sccache
then compiles that unit locally. The scheduler's URL and the token reach the build only
through CONF_DIR/dist.json (mode 0600), which the plugin writes into a named cache: never a
process's env or argv, which are cache keys and which Pants logs at -ldebug.

Usage:
  dist_relay.py probe CONF_DIR
      Asks the scheduler for its status with the token; prints {"shown", "servers", "cpus",
      "problem"} as JSON (all empty when no farm is configured).
  dist_relay.py forward CONF_DIR SOCKET_DIR WATCH_PID
      Outside the build: serves SOCKET_DIR/proxy.sock in the background until process
      WATCH_PID has ended; copies the settings sccache needs to SOCKET_DIR/dist.json (0600).
The end inside the build is dist_proxy.py.
"""

import json
import os
import re
import socket
import ssl
import sys
import threading
from urllib.parse import urlsplit

CONF = "dist.json"
SOCKET = "proxy.sock"
CERTIFICATE = re.compile(r"^/api/v1/scheduler/server_certificate/([0-9A-Za-z.:\[\]-]+)$")
HEAD_LIMIT = 64 << 10


class BadSettings(Exception):
    pass


def sockets():
    """ccache_remote.py's relay helpers, beside this script in the sandbox (the plugin loads
    this module for `store` alone, where that file is not importable)."""
    import ccache_remote

    return ccache_remote


def scheduler_of(url):
    """(scheme, host, port, shown) of the scheduler's URL; raises BadSettings."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadSettings(f"`{parts.scheme}://{parts.hostname or ''}` is not an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise BadSettings("the URL carries credentials; give the token in the token file")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise BadSettings("the port is not a number from 0 to 65535") from None
    return parts.scheme, parts.hostname, port, f"{parts.scheme}://{parts.hostname}:{port}"


def store(conf_dir, url, token):
    """Writes CONF_DIR/dist.json (mode 0600), or removes it when no scheduler is set; returns
    how to show the scheduler. Raises BadSettings."""
    path = os.path.join(conf_dir, CONF)
    if not url.strip():
        if os.path.exists(path):
            os.remove(path)
        return ""
    scheme, host, port, shown = scheduler_of(url)
    if not token or any(c in token for c in "\r\n"):
        raise BadSettings("the token file is empty or holds more than one line")
    os.makedirs(conf_dir, exist_ok=True)
    write_private(path, json.dumps({"scheme": scheme, "host": host, "port": port, "shown": shown, "token": token}))
    return shown


def write_private(path, text):
    """`text` at `path`, readable by this user only (it holds the token), never half-written."""
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def load(conf_dir):
    with open(os.path.join(conf_dir, CONF)) as f:
        return json.load(f)


def open_scheduler(conf, timeout=10):
    conn = socket.create_connection((conf["host"], conf["port"]), timeout=timeout)
    if conf["scheme"] == "https":
        conn = ssl.create_default_context().wrap_socket(conn, server_hostname=conf["host"])
    conn.settimeout(None)
    return conn


def ask_status(send_request):
    """The scheduler's status as {"servers", "cpus"}, or why not; `send_request(bytes)` returns
    the whole response."""
    try:
        response = send_request()
    except OSError as e:
        return None, f"cannot connect: {e}"
    head, _, body = response.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if not re.match(r"HTTP/1\.[01] 200 ", status):
        return None, f"the status request was answered `{status}` {body[:200].decode(errors='replace')}".strip()
    try:
        answer = json.loads(body)
    except ValueError:
        return None, "the status answer is not JSON"
    return {"servers": answer.get("num_servers", 0), "cpus": answer.get("num_cpus", 0)}, None


def status_request(host, port, token, absolute):
    target = f"http://{host}:{port}/api/v1/scheduler/status" if absolute else "/api/v1/scheduler/status"
    return (f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: application/json\r\nConnection: close\r\n\r\n").encode()


def read_all(conn):
    chunks = []
    while True:
        data = conn.recv(1 << 16)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def probe(conf_dir):
    try:
        conf = load(conf_dir)
    except FileNotFoundError:
        print(json.dumps({"shown": "", "servers": 0, "cpus": 0, "problem": None}))
        return 0

    def send():
        with open_scheduler(conf, timeout=5) as conn:
            conn.settimeout(5)
            conn.sendall(status_request(conf["host"], conf["port"], conf["token"], absolute=False))
            return read_all(conn)

    status, problem = ask_status(send)
    print(json.dumps({"shown": conf["shown"], **(status or {"servers": 0, "cpus": 0}), "problem": problem}))
    return 0


# ----------------------------------------------------------------------- outside the build


def read_head(conn):
    """The request head (up to and with the blank line) and what came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(1 << 14)
        if not chunk or len(data) > HEAD_LIMIT:
            raise ValueError("no complete request head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def answer(conn, status, reason):
    body = reason.encode()
    conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    conn.close()


class Forwarder:
    def __init__(self, conf):
        self.conf = conf
        self.vouched = set()  # "host:port" of build servers the scheduler named to this build
        self.lock = threading.Lock()

    def handle(self, client):
        try:
            head, rest = read_head(client)
            method, target, _ = head.split("\r\n", 1)[0].split(" ", 2)
        except ValueError:
            return answer(client, "400 Bad Request", "not an HTTP proxy request")
        if method == "CONNECT":
            return self.tunnel(client, target, rest)
        parts = urlsplit(target)
        if (parts.scheme, parts.hostname, parts.port or 80) != ("http", self.conf["host"], self.conf["port"]):
            return answer(client, "403 Forbidden", f"{target}: only the scheduler is reached over plain HTTP")
        self.to_scheduler(client, method, parts, head, rest)

    def tunnel(self, client, target, rest):
        with self.lock:
            vouched = target in self.vouched
        if not vouched:
            return answer(client, "403 Forbidden", f"{target} is not a build server the scheduler named to this build")
        host, _, port = target.rpartition(":")
        try:
            server = sockets().connect(["tcp", host.strip("[]"), int(port)], 10)
        except OSError as e:
            return answer(client, "502 Bad Gateway", f"{target}: {e}")
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            server.sendall(rest)
        sockets().relay(client, server)

    def to_scheduler(self, client, method, parts, head, rest):
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        lines = head.split("\r\n")[1:]
        lines = [line for line in lines if not line.lower().startswith(("connection:", "proxy-"))]
        request = "\r\n".join([f"{method} {path} HTTP/1.1", *lines, "Connection: close", "", ""]).encode()
        try:
            server = open_scheduler(self.conf)
        except OSError as e:
            return answer(client, "502 Bad Gateway", f"the scheduler {self.conf['shown']}: {e}")
        server.sendall(request + rest)
        threading.Thread(target=self.pump_body, args=(client, server), daemon=True).start()
        vouches = CERTIFICATE.match(parts.path)
        response = b""
        while True:
            data = server.recv(1 << 16)
            if vouches and b"\r\n" not in response:
                response += data
                if b"\r\n" in response and re.match(rb"HTTP/1\.[01] 200 ", response):
                    with self.lock:
                        self.vouched.add(vouches.group(1))
            if not data:
                break
            client.sendall(data)
        for end in (client, server):  # shut down, not only closed: pump_body still reads the client
            end.shutdown(socket.SHUT_RDWR)
            end.close()

    @staticmethod
    def pump_body(client, server):
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    break
                server.sendall(data)
        except OSError:
            pass


def forward(conf_dir, socket_dir, watch_pid):
    try:
        conf = load(conf_dir)
        listener = sockets().listen_unix(socket_dir, SOCKET)
        settings = {"scheduler": f"http://{conf['host']}:{conf['port']}", "shown": conf["shown"], "token": conf["token"]}
        write_private(os.path.join(socket_dir, CONF), json.dumps(settings))
    except (OSError, ValueError) as e:
        print(f"rocm_build: warning: no distributed compilation for this build: {e}", file=sys.stderr)
        return 0
    forwarder = Forwarder(conf)
    return sockets().serve_in_background(listener, None, watch_pid, lambda client: threading.Thread(
        target=forwarder.handle, args=(client,), daemon=True).start())


def main(argv):
    if argv[1:2] == ["probe"]:
        return probe(argv[2])
    if argv[1:2] == ["forward"]:
        return forward(argv[2], argv[3], int(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
