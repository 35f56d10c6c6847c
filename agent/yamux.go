package agent

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/yamux"
)

// yamuxConfig is tuned for latency on a local byte stream: keepalive on so
// a dead peer is noticed, a 1 MiB window so bulk output is not throttled,
// and a small backlog so a hostile peer cannot queue many streams.
func yamuxConfig(log *slog.Logger, backlog int) *yamux.Config {
	return &yamux.Config{
		AcceptBacklog:          backlog,
		EnableKeepAlive:        true,
		KeepAliveInterval:      15 * time.Second,
		ConnectionWriteTimeout: 30 * time.Second,
		MaxStreamWindowSize:    1 << 20,
		StreamOpenTimeout:      30 * time.Second,
		StreamCloseTimeout:     30 * time.Second,
		Logger:                 yamuxLogger{log},
	}
}

// yamuxLogger forwards yamux's messages to slog at debug level.
type yamuxLogger struct{ l *slog.Logger }

func (y yamuxLogger) Print(v ...any)                 { y.l.Debug(fmt.Sprint(v...)) }
func (y yamuxLogger) Printf(format string, v ...any) { y.l.Debug(fmt.Sprintf(format, v...)) }
func (y yamuxLogger) Println(v ...any)               { y.l.Debug(fmt.Sprint(v...)) }
