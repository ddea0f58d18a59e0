package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// The day table (run_days) adds the receipts up per UTC day, repository,
// mode and status as they are kept, in the receipt's own transaction: a
// new receipt adds to its row, a replaced one takes its old figures out of
// theirs first. The dashboard's figures read it (figures), so they cost the
// same with a hundred or a hundred thousand receipts.

const dayTable = `CREATE TABLE run_days (
	day         BIGINT NOT NULL, -- the UTC day's start, unix milliseconds
	repo        TEXT NOT NULL,
	repo_id     BIGINT NOT NULL,
	mode        TEXT NOT NULL,
	status      TEXT NOT NULL,
	runs        BIGINT NOT NULL,
	cost_micros BIGINT NOT NULL,
	duration_ms BIGINT NOT NULL,
	PRIMARY KEY (day, repo, repo_id, mode, status)
)`

// fillDays adds up the receipts a database holds when the day table is
// made (migration 3).
const fillDays = `INSERT INTO run_days (day, repo, repo_id, mode, status, runs, cost_micros, duration_ms)
	SELECT ended_at - ended_at % 86400000, repo, repo_id, mode, status, COUNT(*),
		CAST(SUM(ROUND(cost_usd * 1000000)) AS BIGINT), CAST(SUM(ROUND(duration_s * 1000)) AS BIGINT)
	FROM runs GROUP BY ended_at - ended_at % 86400000, repo, repo_id, mode, status`

// dayRow is what one receipt adds to (or takes from) the day tables.
type dayRow struct {
	day, repoID       int64
	repo, mode, state string
	costMicros, ms    int64
	// For usage_days: the installation, whether the cost is unknown, the
	// tokens.
	inst, unknown, in, out int64
}

func dayRowOf(r Run) dayRow {
	ended := r.EndedAt.UnixMilli()
	return dayRow{day: ended - ended%day.Milliseconds(), repoID: r.RepoID, repo: r.Repo, mode: r.Mode, state: r.Status,
		costMicros: int64(math.Round(r.CostUSD * 1e6)), ms: int64(math.Round(r.DurationSeconds * 1000)),
		inst: r.InstallationID, unknown: int64(boolInt(r.CostUnknown)), in: r.InputTokens, out: r.OutputTokens}
}

// dayRollups keep the day tables (run_days, usage_days) equal to the
// receipts: a receipt's write moves its figures in them, in its own
// transaction.
type dayRollups struct{ *database }

// keptRow is the day row of the receipt kept for taskID, if any.
func (s *dayRollups) keptRow(ctx context.Context, tx *sql.Tx, taskID string) (dayRow, bool, error) {
	var r Run
	var ended int64
	var unknown int
	err := tx.QueryRowContext(ctx, s.q(`SELECT repo, repo_id, mode, status, cost_usd, duration_s, ended_at, installation_id, cost_unknown, tokens_in, tokens_out
	FROM runs WHERE task_id = ?`), taskID).
		Scan(&r.Repo, &r.RepoID, &r.Mode, &r.Status, &r.CostUSD, &r.DurationSeconds, &ended, &r.InstallationID, &unknown, &r.InputTokens, &r.OutputTokens)
	if errors.Is(err, sql.ErrNoRows) {
		return dayRow{}, false, nil
	}
	if err != nil {
		return dayRow{}, false, fmt.Errorf("receipts: read the kept receipt of %s in %s: %w", taskID, s.where, err)
	}
	r.EndedAt, r.CostUnknown = time.UnixMilli(ended).UTC(), unknown == 1
	return dayRowOf(r), true, nil
}

// addDay adds one receipt's figures to its day row (sign 1), or takes them
// out (sign -1; a row left with no run goes).
func (s *dayRollups) addDay(ctx context.Context, tx *sql.Tx, d dayRow, sign int64) error {
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO run_days (day, repo, repo_id, mode, status, runs, cost_micros, duration_ms)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, repo, repo_id, mode, status) DO UPDATE SET runs = run_days.runs + excluded.runs,
	cost_micros = run_days.cost_micros + excluded.cost_micros, duration_ms = run_days.duration_ms + excluded.duration_ms`),
		d.day, d.repo, d.repoID, d.mode, d.state, sign, sign*d.costMicros, sign*d.ms); err != nil {
		return fmt.Errorf("receipts: add up the day's figures in %s: %w", s.where, err)
	}
	if err := s.addUsageDay(ctx, tx, d, sign); err != nil {
		return err
	}
	if sign > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM run_days WHERE day = ? AND repo = ? AND repo_id = ? AND mode = ? AND status = ? AND runs <= 0`),
		d.day, d.repo, d.repoID, d.mode, d.state); err != nil {
		return fmt.Errorf("receipts: add up the day's figures in %s: %w", s.where, err)
	}
	return nil
}

// usageDays adds the receipts up per UTC day, repository and
// installation, for the usage page's year (usage.go): a few rows a day,
// whatever the number of receipts. Known costs only: a run of unknown cost
// is counted in unknown_runs.
const usageDays = `CREATE TABLE usage_days (
	day             BIGINT NOT NULL, -- the UTC day's start, unix milliseconds
	repo            TEXT NOT NULL,
	repo_id         BIGINT NOT NULL,
	installation_id BIGINT NOT NULL,
	runs            BIGINT NOT NULL,
	unknown_runs    BIGINT NOT NULL,
	cost_micros     BIGINT NOT NULL,
	tokens_in       BIGINT NOT NULL,
	tokens_out      BIGINT NOT NULL,
	PRIMARY KEY (day, repo, repo_id, installation_id)
)`

// fillUsageDays adds up the receipts a database holds when the table is
// made (migration 5).
const fillUsageDays = `INSERT INTO usage_days (day, repo, repo_id, installation_id, runs, unknown_runs, cost_micros, tokens_in, tokens_out)
	SELECT ended_at - ended_at % 86400000, repo, repo_id, installation_id, COUNT(*), CAST(SUM(cost_unknown) AS BIGINT),
		CAST(SUM(CASE WHEN cost_unknown = 0 THEN ROUND(cost_usd * 1000000) ELSE 0 END) AS BIGINT),
		CAST(SUM(tokens_in) AS BIGINT), CAST(SUM(tokens_out) AS BIGINT)
	FROM runs GROUP BY ended_at - ended_at % 86400000, repo, repo_id, installation_id`

// addUsageDay adds a receipt's figures to its usage_days row, or takes
// them out (a row left with no run goes).
func (s *dayRollups) addUsageDay(ctx context.Context, tx *sql.Tx, d dayRow, sign int64) error {
	cost := d.costMicros
	if d.unknown == 1 {
		cost = 0
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO usage_days (day, repo, repo_id, installation_id, runs, unknown_runs, cost_micros, tokens_in, tokens_out)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, repo, repo_id, installation_id) DO UPDATE SET runs = usage_days.runs + excluded.runs,
	unknown_runs = usage_days.unknown_runs + excluded.unknown_runs, cost_micros = usage_days.cost_micros + excluded.cost_micros,
	tokens_in = usage_days.tokens_in + excluded.tokens_in, tokens_out = usage_days.tokens_out + excluded.tokens_out`),
		d.day, d.repo, d.repoID, d.inst, sign, sign*d.unknown, sign*cost, sign*d.in, sign*d.out); err != nil {
		return fmt.Errorf("receipts: add up the day's usage in %s: %w", s.where, err)
	}
	if sign > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM usage_days WHERE day = ? AND repo = ? AND repo_id = ? AND installation_id = ? AND runs <= 0`),
		d.day, d.repo, d.repoID, d.inst); err != nil {
		return fmt.Errorf("receipts: add up the day's usage in %s: %w", s.where, err)
	}
	return nil
}
