package bus

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// ServerLogger adapts a zerolog logger to the embedded server's logger. The
// server's notices are debug lines; its warnings and errors stay so.
func ServerLogger(l zerolog.Logger) server.Logger {
	return serverLogger{l.With().Str("component", "nats-server").Logger()}
}

type serverLogger struct{ l zerolog.Logger }

func (s serverLogger) Noticef(format string, v ...any) { s.l.Debug().Msg(fmt.Sprintf(format, v...)) }
func (s serverLogger) Warnf(format string, v ...any)   { s.l.Warn().Msg(fmt.Sprintf(format, v...)) }
func (s serverLogger) Fatalf(format string, v ...any)  { s.l.Error().Msg(fmt.Sprintf(format, v...)) }
func (s serverLogger) Errorf(format string, v ...any)  { s.l.Error().Msg(fmt.Sprintf(format, v...)) }
func (s serverLogger) Debugf(format string, v ...any)  { s.l.Trace().Msg(fmt.Sprintf(format, v...)) }
func (s serverLogger) Tracef(format string, v ...any)  { s.l.Trace().Msg(fmt.Sprintf(format, v...)) }
