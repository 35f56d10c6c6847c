package e2b

import (
	"net/http"

	"github.com/airlock-dev/airlock/e2b/envdpb/envdpbconnect"
)

func newEnvd(h *Handler) *envd {
	e := &envd{h: h}
	mux := http.NewServeMux()
	mux.Handle(envdpbconnect.NewProcessHandler(newProcessSvc(e)))
	mux.Handle(envdpbconnect.NewFilesystemHandler(&fsSvc{e: e}))
	e.rpc = mux
	return e
}
