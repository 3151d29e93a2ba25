package bus

import (
	"fmt"
	"strings"

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

// passwordlessAnonymous quiets the one warning the default identities
// cause: the anonymous user has no password by design (clients without
// credentials get its rights), and nats-server counts that as a plaintext
// password. The workers' password is a bcrypt hash.
type passwordlessAnonymous struct{ server.Logger }

func (p passwordlessAnonymous) Warnf(format string, v ...any) {
	if strings.HasPrefix(format, "Plaintext passwords detected") {
		p.Debugf(format, v...)
		return
	}
	p.Logger.Warnf(format, v...)
}
