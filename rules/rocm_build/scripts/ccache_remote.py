"""ccache's remote storage for builds that have no network.

Builds run without network, so ccache inside cannot reach a Redis server. A forwarder on the
host side listens on a Unix socket inside the sandbox (sockets are files: they cross network
namespaces and container bind mounts) and relays each connection to the configured server.
The build's ccache is pointed at that socket; the server's address never enters the build's
environment as Pants sees it, so it is in no cache key.

The plugin writes the address (it may hold a password) to CACHE_DIR/storage.json, mode 0600,
itself (`store`, loaded as a module): never through a process's env or argv, which are cache
keys and which Pants logs at -ldebug.

Usage:
  ccache_remote.py probe CACHE_DIR
      Checks that the server in CACHE_DIR/storage.json answers; prints {"shown": ...,
      "problem": ...} as JSON (both empty when none is configured).
  ccache_remote.py forward CACHE_DIR SOCKET_DIR WATCH_PID
      Starts the forwarder in the background and returns once it listens; it writes the URL
      for ccache to SOCKET_DIR/url (with @SOCKET@ for the socket's path as the build sees
      it) and stops when process WATCH_PID (the build) has ended.
  ccache_remote.py sccache-relay SOCKET_DIR WATCH_PID
      Inside the build: sccache's Redis client takes no Unix socket, so this listens on
      127.0.0.1 (the build's own loopback) and relays to the forwarder's socket; prints the
      SCCACHE_REDIS_* settings for sccache's server, one NAME=VALUE a line.
"""

import json
import os
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

STORAGE = "storage.json"
SOCKET = "redis.sock"
ACCEPTED = ("redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] or redis+unix:/PATH/TO/SOCKET "
            "(ccache attributes may follow after `|`, e.g. `|read-only=true`)")


class BadAddress(Exception):
    pass


def parse(address):
    """The server to connect to, how to show it (without credentials) and ccache's URL."""
    url, bar, attributes = address.strip().partition("|")
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo.startswith(":"):
        userinfo = userinfo[1:]  # a password alone: ccache 4.7 sends no AUTH for `:PASSWORD`
    if parts.scheme == "redis":
        if not parts.hostname:
            raise BadAddress("no host")
        try:
            port = parts.port or 6379
        except ValueError:
            # Not Python's message: it quotes what stood after the colon, which may be a password.
            raise BadAddress("the port is not a number from 0 to 65535") from None
        db = parts.path.strip("/")
        if db and not db.isdigit():
            raise BadAddress(f"the database `{db}` is not a number")
        target, shown = ["tcp", parts.hostname, port], f"redis://{parts.hostname}:{port}"
    elif parts.scheme == "redis+unix":
        if not parts.path.startswith("/"):
            raise BadAddress("the socket path is not absolute")
        db = dict(p.partition("=")[::2] for p in parts.query.split("&") if p).get("db", "")
        target, shown = ["unix", parts.path], f"redis+unix:{parts.path}"
    else:
        # Never the address itself: it may hold a password (`:secret@host` has no scheme).
        raise BadAddress(f"the scheme `{parts.scheme}` is not redis or redis+unix" if parts.scheme else "no scheme")
    ccache_url = f"redis+unix://{userinfo + '@localhost' if userinfo else ''}@SOCKET@"
    ccache_url += (f"?db={db}" if db else "") + bar + attributes
    return {"target": target, "shown": shown, "url": ccache_url, "auth": userinfo, "db": db}


def connect(target, timeout):
    if target[0] == "unix":
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        conn.connect(target[1])
    else:
        conn = socket.create_connection((target[1], target[2]), timeout=timeout)
    conn.settimeout(None)
    return conn


def resp(*words):
    return b"".join([f"*{len(words)}\r\n".encode(), *(f"${len(w.encode())}\r\n{w}\r\n".encode() for w in words)])


def probe(config):
    """None when the server answers PING (after AUTH when credentials are given), else why not."""
    try:
        with connect(config["target"], 3) as conn:
            conn.settimeout(3)
            if config["auth"]:
                user, _, password = config["auth"].rpartition(":")
                conn.sendall(resp("AUTH", *([user] if user else []), password))
                reply = conn.recv(512)
                if not reply.startswith(b"+OK"):
                    return f"AUTH was refused: {reply.decode(errors='replace').strip()}"
            conn.sendall(resp("PING"))
            reply = conn.recv(512)
    except OSError as e:
        return f"cannot connect: {e}"
    if not reply.startswith(b"+PONG"):
        return f"PING answered {reply.decode(errors='replace').strip() or 'nothing'}"
    return None


def store(cache_dir, address):
    """Writes CACHE_DIR/storage.json (mode 0600) for `address`, or removes it when empty;
    returns how to show the server. Raises BadAddress."""
    path = os.path.join(cache_dir, STORAGE)
    if not address.strip():
        if os.path.exists(path):
            os.remove(path)
        return ""
    config = parse(address)
    os.makedirs(cache_dir, exist_ok=True)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    os.replace(path + ".tmp", path)
    return config["shown"]


def probe_stored(cache_dir):
    try:
        with open(os.path.join(cache_dir, STORAGE)) as f:
            config = json.load(f)
    except FileNotFoundError:
        print(json.dumps({"shown": "", "problem": None}))
        return 0
    print(json.dumps({"shown": config["shown"], "problem": probe(config)}))
    return 0


def pump(src, dst, seen=None):
    """Copies what `src` sends to `dst` until either side closes; `seen(n)` hears of each chunk."""
    try:
        while True:
            data = src.recv(1 << 20)
            if not data:
                break
            if seen:
                seen(len(data))
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(client, server, seen=None):
    """Both directions of one connection, each in a thread; `seen` hears what the server sends.
    (bench/run.py's byte-counting proxy uses this too.)"""
    threading.Thread(target=pump, args=(client, server), daemon=True).start()
    threading.Thread(target=pump, args=(server, client, seen), daemon=True).start()


def serve(listener, target):
    down = False  # after one failed connection every compile gets a quick refusal instead
    while True:
        client, _ = listener.accept()
        if down:
            client.close()
            continue
        try:
            server = connect(target, 2)
        except OSError:
            down = True
            client.close()
            continue
        relay(client, server)


def watch(pid):
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        time.sleep(0.5)


def forward(cache_dir, socket_dir, watch_pid):
    if os.environ.get("CCACHE_DISABLE"):
        return 0
    try:
        return start_forwarder(cache_dir, socket_dir, watch_pid)
    except (OSError, ValueError) as e:
        # The build goes on with its local compiler cache.
        print(f"rocm_build: warning: no ccache remote storage for this build: {e}", file=sys.stderr)
        return 0


def listen_unix(socket_dir, name):
    """A listening socket at SOCKET_DIR/NAME, where the build (in its own namespaces) reaches it."""
    os.makedirs(socket_dir, exist_ok=True)
    path = os.path.join(socket_dir, name)
    if os.path.exists(path):
        os.remove(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    return listener


def start_forwarder(cache_dir, socket_dir, watch_pid):
    with open(os.path.join(cache_dir, STORAGE)) as f:
        config = json.load(f)
    listener = listen_unix(socket_dir, SOCKET)
    with open(os.path.join(socket_dir, "url"), "w") as f:
        f.write(config["url"])
    # For sccache's relay (sccache_relay): credentials and database, readable by the build only.
    fd = os.open(os.path.join(socket_dir, "redis.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"auth": config["auth"], "db": config.get("db", "")}, f)
    return serve_in_background(listener, config["target"], watch_pid)


def serve_in_background(listener, target, watch_pid, handle=None):
    """Relays each connection to `target`, or hands it to `handle` (dist_relay.py's forwarder),
    in a child process that ends with process `watch_pid`."""
    if os.fork():
        return 0  # the build goes on; the child serves
    os.setsid()
    # Away from the build's stdout and stderr: Pants waits for those to close.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    threading.Thread(target=watch, args=(watch_pid,), daemon=True).start()
    if handle is None:
        serve(listener, target)
    while True:
        handle(listener.accept()[0])


def sccache_relay(socket_dir, watch_pid):
    with open(os.path.join(socket_dir, "redis.json")) as f:
        redis = json.load(f)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    user, _, password = redis["auth"].rpartition(":")  # `PASSWORD` alone: no user
    settings = {"SCCACHE_REDIS_ENDPOINT": f"tcp://127.0.0.1:{listener.getsockname()[1]}",
                "SCCACHE_REDIS_USERNAME": user, "SCCACHE_REDIS_PASSWORD": password, "SCCACHE_REDIS_DB": redis["db"]}
    print("\n".join(f"{k}={v}" for k, v in settings.items() if v), flush=True)
    return serve_in_background(listener, ["unix", os.path.abspath(os.path.join(socket_dir, SOCKET))], watch_pid)


def main(argv):
    if argv[1] == "probe":
        return probe_stored(argv[2])
    if argv[1] == "forward":
        return forward(argv[2], argv[3], int(argv[4]))
    if argv[1] == "sccache-relay":
        return sccache_relay(argv[2], int(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
