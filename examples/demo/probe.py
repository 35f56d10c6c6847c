"""What an untrusted agent might try. Run by `make demo` twice: once on the
host, once inside `airlock run`, so the difference is the sandbox."""
import os
import socket
import sys

port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
home = os.environ.get("DEMO_HOME", os.path.expanduser("~"))
outside = os.environ.get("DEMO_OUTSIDE", "/tmp/airlock-demo-outside")

def attempt(name, fn):
    try:
        detail = fn()
        print(f"  {name:<44} DONE     {detail}")
    except Exception as e:  # the sandbox answers with an error
        print(f"  {name:<44} refused  {type(e).__name__}: {e}")

def read_ssh():
    with open(os.path.join(home, ".ssh", "id_ed25519")) as f:
        return "read %d bytes of a private key" % len(f.read())

def write_outside():
    with open(os.path.join(outside, "planted.txt"), "w") as f:
        f.write("agent was here\n")
    return "wrote " + os.path.join(outside, "planted.txt")

def write_workspace():
    with open("airlock-demo-output.txt", "w") as f:
        f.write("results\n")
    return "wrote ./airlock-demo-output.txt"

def plant_hook():
    hook = os.path.join("vendor", "lib", ".git", "hooks", "post-checkout")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho pwned\n")
    os.chmod(hook, 0o755)
    return "planted " + hook + " (runs on your next git checkout)"

def setuid():
    with open("helper", "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod("helper", 0o4755)
    return "made ./helper set-uid"

def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    data = s.recv(64)
    s.close()
    return "host service answered: %r" % data[:16]

def env_secret():
    v = os.environ.get("DEMO_API_KEY")
    if v is None:
        raise LookupError("DEMO_API_KEY is not in the environment")
    return "saw DEMO_API_KEY=" + v

attempt("read ~/.ssh/id_ed25519", read_ssh)
attempt("write outside the workspace", write_outside)
attempt("write inside the workspace", write_workspace)
attempt("plant a git hook in a nested repository", plant_hook)
attempt("make a set-uid file", setuid)
attempt("connect to a service on the host", connect)
attempt("read DEMO_API_KEY from the environment", env_secret)
