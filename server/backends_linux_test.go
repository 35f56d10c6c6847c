package server

// The integration tests in this package open real backends by name, which
// only works once each has registered itself.
import _ "github.com/airlock-dev/airlock/backend/native"
