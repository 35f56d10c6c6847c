package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
)

// The Engine API client: the handful of endpoints the backend uses, over
// the standard library. Docker's own Go client links OpenTelemetry and
// compiles the image-reference regexps at package init, which every
// sandbox start paid for (this binary is also every sandbox's init and
// agent); see RATIONALE "Why does the docker backend speak the Engine API
// itself?". Requests use moby's API types (the wire's own definition);
// answers are decoded into the few fields read here, so a daemon older or
// newer than those types cannot break decoding.

// Engine API versions: the oldest this backend needs (dockerd 20.10 brought
// CgroupnsMode and per-rule errnoRet in seccomp profiles), and the newest
// it asks for (what it was tested with); a daemon's own version between the
// two is used.
const (
	minAPIVersion = "1.41"
	maxAPIVersion = "1.51"
)

// engine is a client of one daemon. Its API version is settled by Ping.
type engine struct {
	host    string // as configured, for messages: unix:///var/run/docker.sock
	network string // unix or tcp
	addr    string // socket path or host:port
	hc      *http.Client

	mu      sync.Mutex
	version string // "1.41"; empty until Ping
}

// apiError is the daemon's answer to a failed request.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

// notFound reports whether err is the daemon's "no such ..." answer.
func notFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// conflict reports whether err is the daemon's 409 (a name in use).
func conflict(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict
}

// newEngine makes a client of host ("" is $DOCKER_HOST, else the default
// socket). Only unix sockets and plain TCP are spoken: a daemon behind TLS
// client certificates is refused with a message rather than reached
// without them.
func newEngine(host string) (*engine, error) {
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %v", host, err)
	}
	e := &engine{host: host}
	switch u.Scheme {
	case "unix":
		e.network, e.addr = "unix", u.Path
	case "tcp":
		if os.Getenv("DOCKER_TLS_VERIFY") != "" || os.Getenv("DOCKER_CERT_PATH") != "" {
			return nil, fmt.Errorf("docker host %q: TLS client certificates (DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) are not supported: reach the daemon over its unix socket", host)
		}
		e.network, e.addr = "tcp", u.Host
	default:
		return nil, fmt.Errorf("docker host %q: want unix:///path or tcp://host:port", host)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, e.network, e.addr)
		},
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	e.hc = &http.Client{Transport: tr}
	return e, nil
}

// url is the request URL of path under the API version, settled by a Ping
// first when no call did yet.
func (e *engine) url(ctx context.Context, path string, q url.Values) (string, error) {
	e.mu.Lock()
	v := e.version
	e.mu.Unlock()
	if v == "" {
		if err := e.Ping(ctx); err != nil {
			return "", err
		}
		e.mu.Lock()
		v = e.version
		e.mu.Unlock()
	}
	s := "http://docker/v" + v + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s, nil
}

// do sends a request and returns the answer when its status is 2xx (the
// caller closes the body), else the daemon's error.
func (e *engine) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	u, err := e.url(ctx, path, q)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeAPIError(resp)
}

func decodeAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &m) != nil || m.Message == "" {
		m.Message = strings.TrimSpace(string(b))
	}
	if m.Message == "" {
		m.Message = resp.Status
	}
	return &apiError{Status: resp.StatusCode, Message: m.Message}
}

// call sends in (JSON, when not nil) and decodes the answer into out (when
// not nil).
func (e *engine) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := e.do(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}

// Ping checks that the daemon answers and settles the API version.
func (e *engine) Ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return decodeAPIError(resp)
	}
	v := resp.Header.Get("Api-Version")
	switch {
	case v == "":
		v = minAPIVersion // a daemon too old to say is checked by the caller
	case versionLess(maxAPIVersion, v):
		v = maxAPIVersion
	}
	e.mu.Lock()
	e.version = v
	e.mu.Unlock()
	return nil
}

// APIVersion is the version Ping settled ("" before).
func (e *engine) APIVersion() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.version
}

// daemonInfo is what the backend reads of GET /info.
type daemonInfo struct {
	ServerVersion   string
	CgroupDriver    string
	CgroupVersion   string
	SecurityOptions []string
	DefaultRuntime  string
}

func (e *engine) Info(ctx context.Context) (daemonInfo, error) {
	var i daemonInfo
	return i, e.call(ctx, http.MethodGet, "/info", nil, nil, &i)
}

// ContainerCreate makes a container called name and returns its ID.
func (e *engine) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, name string) (string, error) {
	body := struct {
		*container.Config
		HostConfig *container.HostConfig `json:"HostConfig,omitempty"`
	}{cfg, hc}
	var out struct{ ID string }
	if err := e.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, body, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

func (e *engine) ContainerStart(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil)
}

// ContainerRemove removes a container whatever its state, with its
// anonymous volumes.
func (e *engine) ContainerRemove(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
}

// containerState is what the backend reads of a container's state.
type containerState struct {
	Status   string
	Pid      int
	ExitCode int
	Error    string
}

func (e *engine) ContainerInspect(ctx context.Context, id string) (*containerState, error) {
	var out struct{ State *containerState }
	if err := e.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.State, nil
}

// containerSummary is a container as GET /containers/json lists it.
type containerSummary struct {
	ID     string `json:"Id"`
	Labels map[string]string
	State  string
}

// ContainerList lists every container (running or not) carrying all the
// labels ("k=v") and, when given, in one of states.
func (e *engine) ContainerList(ctx context.Context, labels, states []string) ([]containerSummary, error) {
	f := map[string][]string{"label": labels}
	if len(states) > 0 {
		f["status"] = states
	}
	fj, _ := json.Marshal(f)
	var out []containerSummary
	err := e.call(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(fj)}}, nil, &out)
	return out, err
}

// ContainerWait waits for the container's next exit: the daemon has
// registered the wait when it returns (so a start after it cannot be
// missed); the exit arrives on the channel, or a failure as status -1.
func (e *engine) ContainerWait(ctx context.Context, id string) (<-chan container.WaitResponse, error) {
	resp, err := e.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/wait", url.Values{"condition": {"next-exit"}}, nil, "")
	if err != nil {
		return nil, err
	}
	ch := make(chan container.WaitResponse, 1)
	go func() {
		defer resp.Body.Close()
		var r container.WaitResponse
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
			r = container.WaitResponse{StatusCode: -1, Error: &container.WaitExitError{Message: err.Error()}}
		}
		ch <- r
	}()
	return ch, nil
}

// hijacked is an attach stream: the raw connection after the upgrade, its
// reads going through the buffer that read the answer's head.
type hijacked struct {
	net.Conn
	r *bufio.Reader
}

func (h *hijacked) Read(b []byte) (int, error) { return h.r.Read(b) }

// ContainerAttach attaches to the container's stdin, stdout and stderr
// (multiplexed: no TTY) on a connection of its own, upgraded to a raw
// stream.
func (e *engine) ContainerAttach(ctx context.Context, id string) (*hijacked, error) {
	q := url.Values{"stream": {"1"}, "stdin": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	u, err := e.url(ctx, "/containers/"+url.PathEscape(id)+"/attach", q)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, e.network, e.addr)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	br := bufio.NewReader(conn)
	resp, err := func() (*http.Response, error) {
		if err := req.Write(conn); err != nil {
			return nil, err
		}
		return http.ReadResponse(br, req)
	}()
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	// 101 from daemons that upgrade, 200 from those that just stream.
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		err := decodeAPIError(resp)
		conn.Close()
		return nil, err
	}
	return &hijacked{Conn: conn, r: br}, nil
}

// volumeSummary is a volume as GET /volumes lists it.
type volumeSummary struct {
	Name   string
	Labels map[string]string
}

// VolumeList lists the volumes carrying all the labels ("k=v").
func (e *engine) VolumeList(ctx context.Context, labels []string) ([]volumeSummary, error) {
	fj, _ := json.Marshal(map[string][]string{"label": labels})
	var out struct{ Volumes []volumeSummary }
	err := e.call(ctx, http.MethodGet, "/volumes", url.Values{"filters": {string(fj)}}, nil, &out)
	return out.Volumes, err
}

func (e *engine) VolumeRemove(ctx context.Context, name string) error {
	return e.call(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), url.Values{"force": {"1"}}, nil, nil)
}

// imageInfo is what the backend reads of an image.
type imageInfo struct {
	ID       string `json:"Id"`
	RepoTags []string
	Config   *struct {
		Env []string
	}
	Metadata struct {
		LastTagTime time.Time
	}
}

func (e *engine) ImageInspect(ctx context.Context, ref string) (*imageInfo, error) {
	var out imageInfo
	if err := e.call(ctx, http.MethodGet, "/images/"+url.PathEscape(ref)+"/json", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ImageLoad loads a `docker save` tarball; the answer is a progress stream
// the caller reads to its end (and closes).
func (e *engine) ImageLoad(ctx context.Context, tarball io.Reader) (io.ReadCloser, error) {
	resp, err := e.do(ctx, http.MethodPost, "/images/load", url.Values{"quiet": {"1"}}, tarball, "application/x-tar")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ImageImport makes image ref from a root filesystem tarball, changes
// being Dockerfile instructions ("ENV K=V"); the answer is a progress
// stream the caller reads to its end (and closes).
func (e *engine) ImageImport(ctx context.Context, rootfs io.Reader, ref string, changes []string) (io.ReadCloser, error) {
	q := url.Values{"fromSrc": {"-"}}
	repo, tag := splitRef(ref)
	q.Set("repo", repo)
	if tag != "" {
		q.Set("tag", tag)
	}
	for _, c := range changes {
		q.Add("changes", c)
	}
	resp, err := e.do(ctx, http.MethodPost, "/images/create", q, rootfs, "application/x-tar")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ImageRemove removes an image (forced, with its untagged parents).
func (e *engine) ImageRemove(ctx context.Context, ref string) error {
	return e.call(ctx, http.MethodDelete, "/images/"+url.PathEscape(ref), url.Values{"force": {"1"}}, nil, nil)
}

// splitRef splits "repo:tag" (a port in the registry part is not a tag).
func splitRef(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i+1:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}
