package main

import "github.com/airlock-dev/airlock/e2b"

// codeInterpreter serves E2B's code-interpreter port; nil until the
// package that speaks its protocol is linked.
var codeInterpreter e2b.CodeInterpreter
