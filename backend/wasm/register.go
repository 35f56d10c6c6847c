package wasm

import (
	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() {
	backend.Register(backend.Factory{Name: "wasm", Rank: 3, Open: func(e backend.Env) (sandbox.Backend, error) {
		return New(Config{Log: e.Log}), nil
	}})
}
