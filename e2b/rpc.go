package e2b

import "net/http"

func newEnvd(h *Handler) *envd {
	return &envd{h: h, rpc: http.NotFoundHandler()}
}
