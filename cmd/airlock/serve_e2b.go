package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/e2b"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/server"
)

// e2bSocket is the unix socket, in the server's run directory, on which
// the E2B adapter reaches /v1: served as untrusted (every request needs a
// key or a sandbox token), so the adapter has no power of its own.
const e2bSocket = "e2b-v1.sock"

// serveE2B starts the E2B endpoint (--e2b-listen) over srv's /v1 API.
func (f *serveFlags) serveE2B(ctx context.Context, srv *server.Server, errc chan<- error, log *slog.Logger, runDir string) error {
	if f.e2bListen == "" {
		if f.e2bDomain != "" || f.e2bTLSCert != "" || f.e2bTLSKey != "" {
			return fmt.Errorf("--e2b-domain, --e2b-tls-cert and --e2b-tls-key need --e2b-listen: %w", sandbox.ErrInvalid)
		}
		return nil
	}
	if (f.e2bTLSCert == "") != (f.e2bTLSKey == "") {
		return fmt.Errorf("--e2b-tls-cert and --e2b-tls-key go together: %w", sandbox.ErrInvalid)
	}
	sock := filepath.Join(runDir, e2bSocket)
	os.Remove(sock)
	iln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("e2b: internal socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		iln.Close()
		return fmt.Errorf("e2b: internal socket: %w", err)
	}
	go func() { errc <- srv.Serve(iln, false) }()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 50 * time.Second,
		DisableCompression: true,
	}
	h := e2b.New(e2b.Config{API: "http://airlock", HTTPClient: &http.Client{Transport: tr},
		Domain: f.e2bDomain, Log: log.With("component", "e2b"), CodeInterpreter: codeInterpreter})
	ln, err := net.Listen("tcp", f.e2bListen)
	if err != nil {
		iln.Close()
		return fmt.Errorf("e2b: listen on %q: %w", f.e2bListen, err)
	}
	scheme := "http"
	var tlsCfg *tls.Config
	if f.e2bTLSCert != "" {
		if tlsCfg, err = tlsConfig(f.e2bTLSCert, f.e2bTLSKey); err != nil {
			ln.Close()
			iln.Close()
			return fmt.Errorf("e2b: %w", err)
		}
		scheme = "https"
	} else {
		log.Warn("E2B listener without TLS: API keys travel in clear text", "addr", ln.Addr().String())
	}
	// The same connection bounds as the API's TCP listener (per client
	// network, per tenant, total, head deadline).
	go func() { errc <- srv.ServeDoor(ln, tlsCfg, h, e2b.Credential) }()
	log.Info("listening", "e2b", scheme+"://"+ln.Addr().String(), "domain", f.e2bDomain)
	return nil
}
