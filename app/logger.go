package app

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// NewLogger returns the bot's logger: JSON lines (or a console format with
// SANDBOX_LOG_PRETTY) at the configured level, with timestamps.
func NewLogger(cfg *Config, w io.Writer) zerolog.Logger {
	if w == nil {
		w = os.Stderr
	}
	if cfg.LogPretty {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
