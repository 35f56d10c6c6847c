package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/airlock-dev/airlock/policy"
)

// TestRequestRulesGRPC: gRPC through request rules with a real gRPC
// implementation on both ends (connect-go speaking the gRPC protocol, its
// client with WithGRPC: HTTP/2, length-prefixed protobuf, grpc-status in
// trailers; google.golang.org/grpc is not a dependency). The allowed method
// answers, its gRPC error status crosses the proxy in the trailers, and a
// method no rule names is refused before the server sees it.
func TestRequestRulesGRPC(t *testing.T) {
	ca := newTestCA(t)
	var mu sync.Mutex
	var seen []string
	echo := func(ctx context.Context, r *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		mu.Lock()
		seen = append(seen, r.Spec().Procedure+" "+r.Peer().Protocol)
		mu.Unlock()
		if r.Msg.Value == "missing" {
			return nil, connect.NewError(connect.CodeNotFound, errors.New("no such thing"))
		}
		return connect.NewResponse(wrapperspb.String("echo: " + r.Msg.Value)), nil
	}
	mux := http.NewServeMux()
	mux.Handle("/test.Echo/Say", connect.NewUnaryHandler("/test.Echo/Say", echo))
	mux.Handle("/test.Echo/Admin", connect.NewUnaryHandler("/test.Echo/Admin", echo))
	s := httptest.NewUnstartedServer(mux)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = ca.ServerConfig(t, "api.test")
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	n := policy.Network{Mode: policy.NetworkAllowlist, Allow: []string{"127.0.0.1/32:443"},
		Requests: []policy.RequestRule{{Host: "api.test", Methods: []string{"POST"}, Path: "/test.Echo/Say"}}}
	h := newHarness(t, Config{Network: n, RootCAs: ca.Pool, Resolver: StaticResolver{"api.test": {loopback}}}, portOf(t, s.URL))
	pu, _ := url.Parse("http://" + h.addr)
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: poolWith(t, h.p.CAPEM())}}}
	say := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](hc, "https://api.test/test.Echo/Say", connect.WithGRPC())
	admin := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](hc, "https://api.test/test.Echo/Admin", connect.WithGRPC())
	ctx := context.Background()
	resp, err := say.CallUnary(ctx, connect.NewRequest(wrapperspb.String("hi")))
	if err != nil || resp.Msg.Value != "echo: hi" {
		t.Fatalf("allowed gRPC call: %v %v", resp, err)
	}
	if _, err := say.CallUnary(ctx, connect.NewRequest(wrapperspb.String("missing"))); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("gRPC status through the proxy: %v (code %v), want not_found from the trailers", err, connect.CodeOf(err))
	}
	_, err = admin.CallUnary(ctx, connect.NewRequest(wrapperspb.String("hi")))
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("gRPC call no rule names: %v (code %v), want permission_denied (the proxy's 403)", err, connect.CodeOf(err))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "/test.Echo/Say grpc" {
		t.Errorf("the server saw %q, want two gRPC calls to Say only", seen)
	}
}
