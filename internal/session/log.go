package session

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/wire"
)

// logErr returns the "err" value among keyvals, or nil.
func logErr(keyvals []any) error {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, _ := keyvals[i].(string); k == "err" {
			err, _ := keyvals[i+1].(error)
			return err
		}
	}
	return nil
}

// KgoLogger adapts a slog logger to franz-go's Logger; nil for nil.
func KgoLogger(l *slog.Logger) kgo.Logger {
	if l == nil {
		return nil
	}
	return slogAdapter{l}
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case a.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case a.l.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelInfo
	case a.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

// saslHint is franz-go's warning for a connection that failed before its
// first answer.
const saslHint = "read from broker errored, killing connection after 0 successful responses (is SASL missing?)"

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level == kgo.LogLevelWarn && msg == saslHint {
		err := logErr(keyvals)
		var held *wire.HeldError
		switch {
		case errors.Is(err, wire.ErrMisroute):
			// The wire layer closed it for naming another cluster, and
			// has warned in those words: SASL has nothing to do with it.
			level, msg = kgo.LogLevelDebug, "connection closed: it answered for another cluster"
		case errors.As(err, &held):
			// The wire layer closed it under a request held for a
			// token the healer withdrew (the heal warned); the request
			// is sent again.
			level, msg = kgo.LogLevelDebug, "connection closed: its request was held for a withdrawn token"
		}
	}
	lvl := slog.LevelError
	switch level {
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	}
	a.l.Log(context.Background(), lvl, msg, keyvals...)
}

// quietLogger passes franz-go's logs on at debug level at most: for the
// cluster watcher's probe clients, whose failures the watcher logs once.
type quietLogger struct{ l kgo.Logger }

func (q quietLogger) Level() kgo.LogLevel {
	if q.l.Level() >= kgo.LogLevelDebug {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelNone
}

func (q quietLogger) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	q.l.Log(kgo.LogLevelDebug, msg, keyvals...)
}
