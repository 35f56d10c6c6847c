package escape

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/native"
	"github.com/airlock-dev/airlock/backend/wasm"
	"github.com/airlock-dev/airlock/sandbox"
)

// backendsUnderTest lists every backend this build has, probed. Add each
// new backend here: the suite then runs every attack against it.
func backendsUnderTest(t *testing.T, f *fixture) []backendUnderTest {
	list := []backendUnderTest{
		{b: native.New(native.Config{AgentBinary: f.agentBin})},
		{b: wasm.New(wasm.Config{}), wasm: true},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range list {
		list[i].probe = list[i].b.Probe(ctx)
	}
	return list
}

var _ sandbox.Backend = (*native.Backend)(nil)
