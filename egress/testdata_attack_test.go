package egress

// attackScript runs inside the sandbox (python3, standard library only).
// Each subcommand prints one result line; the Go test judges it.
const attackScript = `
import os, socket, ssl, sys, urllib.request

def proxy():
    return socket.create_connection(("127.0.0.1", 3128), timeout=10)

cmd = sys.argv[1]
if cmd == "urllib":
    req = urllib.request.Request(sys.argv[2], headers={"x-api-key": os.environ["API_KEY"]})
    print(urllib.request.urlopen(req, timeout=20).read().decode())
elif cmd == "socks":
    name = bytes.fromhex(sys.argv[2]); port = int(sys.argv[3])
    s = proxy()
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + port.to_bytes(2, "big"))
    print("reply", s.recv(10)[1])
elif cmd == "connect":
    s = proxy()
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[2], sys.argv[2])).encode())
    print(s.recv(200).split(b"\r\n")[0].decode())
elif cmd == "sni":
    s = proxy()
    s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[2]).encode())
    status = s.recv(200)
    if b" 200 " not in status:
        print("connect refused"); sys.exit()
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    try:
        t = ctx.wrap_socket(s, server_hostname=sys.argv[3])
        t.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sys.argv[3]).encode())
        print("handshake ok", t.recv(100).split(b"\r\n")[0].decode())
    except Exception as e:
        print("handshake failed", type(e).__name__)
elif cmd == "tcp":
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5)
        print("connected")
    except OSError as e:
        print("refused", e.errno)
elif cmd == "udp":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(3)
    try:
        u.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("127.0.0.1", int(sys.argv[2])))
        u.recvfrom(512)
        print("answered")
    except OSError as e:
        print("no answer", type(e).__name__)
elif cmd == "memscan":
    needle = bytes.fromhex(sys.argv[2]); hits = 0; scanned = 0
    # Every process but this one (which holds the needle it looks for).
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            maps = open("/proc/%s/maps" % pid).read().splitlines()
            mem = open("/proc/%s/mem" % pid, "rb", 0)
        except OSError:
            continue
        for line in maps:
            addr, perms = line.split()[:2]
            if "r" not in perms: continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(lo); data = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            scanned += 1
            hits += data.count(needle)
    print("hits", hits, "regions", scanned)
`
