package server

import (
	"github.com/airlock-dev/airlock/policy"
	"github.com/airlock-dev/airlock/server/admission"
)

// ceiling returns the ceiling of c's requests, nil for the trusted socket.
func (s *Server) ceiling(c caller) *admission.Ceiling {
	if c.trusted {
		return nil
	}
	return s.cfg.Ceilings.For(c.tenant)
}

// checkNetworkRequest checks a PUT .../network of c.
func (s *Server) checkNetworkRequest(c caller, n policy.Network) error {
	return s.ceiling(c).CheckNetwork(c.tenant, n)
}
