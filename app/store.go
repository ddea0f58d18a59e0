package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// openStore opens what the bot keeps for people (receipts and
// transcripts): the PostgreSQL database the replicas share when
// SANDBOX_DATABASE_URL is set, else SQLite under the data directory.
func openStore(cfg *Config) (receipts.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := receipts.Open(ctx, filepath.Join(cfg.DataDir, "receipts"), cfg.DatabaseURL)
	if err != nil {
		if cfg.DatabaseURL != "" {
			return nil, fmt.Errorf("SANDBOX_DATABASE_URL: %w", err)
		}
		return nil, fmt.Errorf("SANDBOX_DATA_DIR: %w", err)
	}
	return store, nil
}

// validateStore checks the store's settings and resolves the retention.
func (c *Config) validateStore() error {
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return errors.New("SANDBOX_DATABASE_URL: not a PostgreSQL URL (postgres://user:password@host:5432/database); leave it unset to keep receipts in SQLite under SANDBOX_DATA_DIR")
	}
	r, err := parseRetention(c.TranscriptRetention)
	if err != nil {
		return fmt.Errorf("SANDBOX_TRANSCRIPT_RETENTION: %w", err)
	}
	c.Retention = r
	return nil
}

// parseRetention reads "90d" (days), a duration such as "720h", or "off"
// (0: no transcripts kept).
func parseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "off" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q is not a whole number of days such as 90d", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Hour {
		return 0, fmt.Errorf("%q is not a retention such as 90d, 720h or off (at least an hour)", v)
	}
	return d, nil
}

// pruneEvery is how often a replica removes the transcripts past the
// retention (every replica does: a prune finds nothing the second time).
const pruneEvery = time.Hour

// pruneTranscripts removes the transcripts older than retention, at start
// and every pruneEvery, until ctx ends; receipts stay.
func pruneTranscripts(ctx context.Context, store receipts.Transcripts, retention time.Duration, log zerolog.Logger) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		p, err := store.Prune(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Msg("prune old transcripts; trying again within the hour")
		case p.Transcripts > 0:
			log.Info().Int("transcripts", p.Transcripts).Int64("lines", p.Lines).Dur("retention", retention).Msg("pruned old transcripts")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
