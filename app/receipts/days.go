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

// dayRow is what one receipt adds to (or takes from) the day table.
type dayRow struct {
	day, repoID       int64
	repo, mode, state string
	costMicros, ms    int64
}

func dayRowOf(r Run) dayRow {
	ended := r.EndedAt.UnixMilli()
	return dayRow{day: ended - ended%day.Milliseconds(), repoID: r.RepoID, repo: r.Repo, mode: r.Mode, state: r.Status,
		costMicros: int64(math.Round(r.CostUSD * 1e6)), ms: int64(math.Round(r.DurationSeconds * 1000))}
}

// keptRow is the day row of the receipt kept for taskID, if any.
func (s *sqlStore) keptRow(ctx context.Context, tx *sql.Tx, taskID string) (dayRow, bool, error) {
	var r Run
	var ended int64
	err := tx.QueryRowContext(ctx, s.q(`SELECT repo, repo_id, mode, status, cost_usd, duration_s, ended_at FROM runs WHERE task_id = ?`), taskID).
		Scan(&r.Repo, &r.RepoID, &r.Mode, &r.Status, &r.CostUSD, &r.DurationSeconds, &ended)
	if errors.Is(err, sql.ErrNoRows) {
		return dayRow{}, false, nil
	}
	if err != nil {
		return dayRow{}, false, fmt.Errorf("receipts: read the kept receipt of %s in %s: %w", taskID, s.where, err)
	}
	r.EndedAt = time.UnixMilli(ended).UTC()
	return dayRowOf(r), true, nil
}

// addDay adds one receipt's figures to its day row (sign 1), or takes them
// out (sign -1; a row left with no run goes).
func (s *sqlStore) addDay(ctx context.Context, tx *sql.Tx, d dayRow, sign int64) error {
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO run_days (day, repo, repo_id, mode, status, runs, cost_micros, duration_ms)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, repo, repo_id, mode, status) DO UPDATE SET runs = run_days.runs + excluded.runs,
	cost_micros = run_days.cost_micros + excluded.cost_micros, duration_ms = run_days.duration_ms + excluded.duration_ms`),
		d.day, d.repo, d.repoID, d.mode, d.state, sign, sign*d.costMicros, sign*d.ms); err != nil {
		return fmt.Errorf("receipts: add up the day's figures in %s: %w", s.where, err)
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
