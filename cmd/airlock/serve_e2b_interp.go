package main

import "github.com/airlock-dev/airlock/e2b"

// codeInterpreter serves E2B's code-interpreter port (49999) over the
// interpreter kernels of package interp, run as /v1 processes.
var codeInterpreter e2b.CodeInterpreter = e2b.NewInterpreter(nil).Serve
