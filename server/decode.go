package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/api"
)

// Request limits. They bound what one request may make the server hold.
const (
	maxJSONBody  = 1 << 20   // a JSON request body
	maxArgs      = 4096      // argv entries
	maxArgvBytes = 256 << 10 // total bytes of argv
	maxEnv       = 1024      // environment entries
	maxEnvBytes  = 256 << 10
	maxLabels    = 64
	maxLabelLen  = 256
)

// decodeBody is decodeJSON for a handler: on error it answers the request
// and returns false.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decodeJSON(r, v); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

// decodeJSON strictly decodes one JSON value from r's body into v: unknown
// fields, trailing data and bodies over maxJSONBody are errors.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &httpError{api.CodeUnsupportedMediaType,
				errBadRequest("request body: content type %q, want application/json", ct)}
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		return errBadRequest("read request body: %v", err)
	}
	if len(body) > maxJSONBody {
		return errTooLarge("request body", maxJSONBody)
	}
	return decodeJSONBytes(body, v)
}

// decodeJSONBytes is decodeJSON's parser, separate so it can be fuzzed.
func decodeJSONBytes(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errBadRequest("request body: empty, want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return errBadRequest("request body: malformed JSON at offset %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return errBadRequest("request body: field %q: want %s", te.Field, te.Type)
		default:
			return errBadRequest("request body: %v", err)
		}
	}
	if dec.More() {
		return errBadRequest("request body: trailing data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errBadRequest("request body: trailing data after the JSON value")
	}
	return nil
}

// checkArgv bounds and validates a command line.
func checkArgv(args []string) error {
	if len(args) == 0 || args[0] == "" {
		return errBadRequest("args: empty command")
	}
	if len(args) > maxArgs {
		return errBadRequest("args: %d entries, at most %d", len(args), maxArgs)
	}
	n := 0
	for _, a := range args {
		n += len(a) + 1
		if strings.IndexByte(a, 0) >= 0 {
			return errBadRequest("args: NUL byte in argument")
		}
	}
	if n > maxArgvBytes {
		return errBadRequest("args: %d bytes, at most %d", n, maxArgvBytes)
	}
	return nil
}

// checkEnv bounds and validates environment additions.
func checkEnv(env map[string]string) error {
	if len(env) > maxEnv {
		return errBadRequest("env: %d entries, at most %d", len(env), maxEnv)
	}
	n := 0
	for k, v := range env {
		n += len(k) + len(v) + 2
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errBadRequest("env: bad variable %q", k)
		}
	}
	if n > maxEnvBytes {
		return errBadRequest("env: %d bytes, at most %d", n, maxEnvBytes)
	}
	return nil
}

// checkLabels bounds labels.
func checkLabels(l map[string]string) error {
	if len(l) > maxLabels {
		return errBadRequest("labels: %d entries, at most %d", len(l), maxLabels)
	}
	for k, v := range l {
		if k == "" || len(k) > maxLabelLen || len(v) > maxLabelLen || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return errBadRequest("labels: bad label %q", k)
		}
	}
	return nil
}
