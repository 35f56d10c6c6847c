package client_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/sandbox/sandboxfake"
	"github.com/airlock-dev/airlock/server"
	"github.com/airlock-dev/airlock/server/admission"
	"github.com/airlock-dev/airlock/server/store"
)

// fakeServe is a server in this process with the fake backend.
type fakeServe struct {
	srv    *server.Server
	store  *store.Store
	socket string
	tcp    string
}

func startFake(dir string, tcp bool) (*fakeServe, error) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	srv, err := server.New(ctx, server.Config{
		Backends:       map[string]sandbox.Backend{"fake": sandboxfake.New("fake")},
		DefaultBackend: "fake",
		Store:          st,
		Policies:       admission.HostPolicies{},
		DataDir:        filepath.Join(dir, "data"),
		CABundle:       []byte{},
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	s := &fakeServe{srv: srv, store: st, socket: filepath.Join(dir, "airlock.sock")}
	uln, err := net.Listen("unix", s.socket)
	if err != nil {
		s.stop()
		return nil, err
	}
	go srv.Serve(uln, true)
	if tcp {
		tln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.stop()
			return nil, err
		}
		s.tcp = "http://" + tln.Addr().String()
		go srv.Serve(tln, false)
	}
	return s, nil
}

func (s *fakeServe) client(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New("unix://"+s.socket, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (s *fakeServe) newKey(t testing.TB, tenant string) string {
	t.Helper()
	key := store.KeyPrefix + tenant + "-" + t.Name()
	if _, err := s.store.AddKey(context.Background(), tenant, "test", key); err != nil {
		t.Fatal(err)
	}
	return key
}

func (s *fakeServe) tcpURL() string  { return s.tcp }
func (s *fakeServe) logText() string { return "" }

func (s *fakeServe) stop() {
	s.srv.Shutdown(context.Background())
	s.store.Close()
}
