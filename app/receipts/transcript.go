package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

const headColumns = `task_id, repo, repo_id, installation_id, number, mode, title, started_at, whole`

const insertHead = `INSERT INTO transcripts (` + headColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// transcriptRows are the Transcripts: the runs' heads (transcripts) and
// their progress lines (transcript_lines).
type transcriptRows struct{ *database }

func (s *transcriptRows) Begin(ctx context.Context, h Head) error {
	if h.TaskID == "" {
		return errors.New("receipts: a transcript needs a task id")
	}
	_, err := s.db.ExecContext(ctx, s.q(insertHead+` ON CONFLICT (task_id) DO UPDATE SET repo = excluded.repo, repo_id = excluded.repo_id,
	installation_id = excluded.installation_id, number = excluded.number, mode = excluded.mode,
	title = CASE WHEN excluded.title <> '' THEN excluded.title ELSE transcripts.title END`),
		h.TaskID, h.Repo, h.RepoID, h.InstallationID, h.Number, h.Mode, h.Title, time.Now().UnixMilli(), 0)
	if err != nil {
		return fmt.Errorf("receipts: keep the transcript head of %s in %s: %w", h.TaskID, s.where, err)
	}
	return nil
}

func (s *transcriptRows) ImportHead(ctx context.Context, h Head) error {
	_, err := s.db.ExecContext(ctx, s.q(insertHead+` ON CONFLICT (task_id) DO NOTHING`),
		h.TaskID, h.Repo, h.RepoID, h.InstallationID, h.Number, h.Mode, h.Title, h.StartedAt.UnixMilli(), boolInt(h.Whole))
	if err != nil {
		return fmt.Errorf("receipts: import the transcript head of %s into %s: %w", h.TaskID, s.where, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *transcriptRows) Append(ctx context.Context, taskID string, lines []Line) (int, error) {
	if len(lines) == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("receipts: begin a write to %s: %w", s.where, err)
	}
	defer tx.Rollback()
	// A line without its head (the head's write failed) still gets one,
	// so retention finds it.
	if _, err := tx.ExecContext(ctx, s.q(insertHead+` ON CONFLICT (task_id) DO NOTHING`),
		taskID, "", 0, 0, 0, "", "", time.Now().UnixMilli(), 0); err != nil {
		return 0, fmt.Errorf("receipts: keep lines of %s in %s: %w", taskID, s.where, err)
	}
	added := 0
	for start := 0; start < len(lines); start += linesPerInsert {
		n, err := s.insertLines(ctx, tx, taskID, lines[start:min(start+linesPerInsert, len(lines))])
		if err != nil {
			return 0, err
		}
		added += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("receipts: commit lines of %s to %s: %w", taskID, s.where, err)
	}
	return added, nil
}

// linesPerInsert bounds one statement's lines (three parameters each,
// well below either database's limit on parameters).
const linesPerInsert = 500

// insertLines keeps lines in one statement, one round trip to the
// database; a line whose number is kept already is left as it is.
func (s *transcriptRows) insertLines(ctx context.Context, tx *sql.Tx, taskID string, lines []Line) (int, error) {
	args := make([]any, 0, 3*len(lines))
	for _, l := range lines {
		if l.Seq < 1 {
			return 0, fmt.Errorf("receipts: line %d of %s: lines are numbered from 1", l.Seq, taskID)
		}
		args = append(args, taskID, l.Seq, string(l.Data))
	}
	query := `INSERT INTO transcript_lines (task_id, seq, line) VALUES (?, ?, ?)` + strings.Repeat(`, (?, ?, ?)`, len(lines)-1) +
		` ON CONFLICT (task_id, seq) DO NOTHING`
	res, err := tx.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, fmt.Errorf("receipts: keep lines %d-%d of %s in %s: %w", lines[0].Seq, lines[len(lines)-1].Seq, taskID, s.where, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (s *transcriptRows) Finish(ctx context.Context, taskID string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE transcripts SET whole = 1 WHERE task_id = ?`), taskID); err != nil {
		return fmt.Errorf("receipts: mark the transcript of %s whole in %s: %w", taskID, s.where, err)
	}
	return nil
}

// headQuery reads heads with their highest line number (by the lines'
// primary key: one step into its index per head).
const headQuery = `SELECT ` + headColumns + `, COALESCE((SELECT MAX(seq) FROM transcript_lines l WHERE l.task_id = t.task_id), 0) FROM transcripts t `

func scanHeads(rows *sql.Rows) ([]Head, error) {
	defer rows.Close()
	var heads []Head
	for rows.Next() {
		var h Head
		var started int64
		var whole int
		if err := rows.Scan(&h.TaskID, &h.Repo, &h.RepoID, &h.InstallationID, &h.Number, &h.Mode, &h.Title, &started, &whole, &h.Lines); err != nil {
			return nil, fmt.Errorf("receipts: read a transcript head: %w", err)
		}
		h.StartedAt, h.Whole = time.UnixMilli(started).UTC(), whole == 1
		heads = append(heads, h)
	}
	return heads, rows.Err()
}

func (s *transcriptRows) Head(ctx context.Context, taskID string) (Head, error) {
	rows, err := s.db.QueryContext(ctx, s.q(headQuery+`WHERE t.task_id = ?`), taskID)
	if err != nil {
		return Head{}, fmt.Errorf("receipts: read the transcript head of %s in %s: %w", taskID, s.where, err)
	}
	heads, err := scanHeads(rows)
	if err != nil {
		return Head{}, err
	}
	if len(heads) == 0 {
		return Head{}, ErrNoTranscript
	}
	return heads[0], nil
}

func (s *transcriptRows) Heads(ctx context.Context, after string, limit int) ([]Head, error) {
	rows, err := s.db.QueryContext(ctx, s.q(headQuery+`WHERE t.task_id > ? ORDER BY t.task_id LIMIT ?`), after, limit)
	if err != nil {
		return nil, fmt.Errorf("receipts: list transcripts in %s: %w", s.where, err)
	}
	return scanHeads(rows)
}

func (s *transcriptRows) Lines(ctx context.Context, taskID string, after, limit int) ([]Line, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT seq, line FROM transcript_lines WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?`), taskID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("receipts: read lines of %s in %s: %w", taskID, s.where, err)
	}
	defer rows.Close()
	var lines []Line
	for rows.Next() {
		var l Line
		var data string
		if err := rows.Scan(&l.Seq, &data); err != nil {
			return nil, fmt.Errorf("receipts: read a line of %s: %w", taskID, err)
		}
		l.Data = []byte(data)
		lines = append(lines, l)
	}
	return lines, rows.Err()
}

// pruneBatch bounds one pruning transaction, so a first prune of a large
// store does not hold the database for long.
const pruneBatch = 500

func (s *transcriptRows) Prune(ctx context.Context, before time.Time) (Pruned, error) {
	var p Pruned
	for {
		n, lines, err := s.pruneSome(ctx, before.UnixMilli())
		p.Transcripts, p.Lines = p.Transcripts+n, p.Lines+lines
		if err != nil {
			return p, err
		}
		if n < pruneBatch {
			return p, s.tune(ctx)
		}
	}
}

// pruneSome removes up to pruneBatch old transcripts in one transaction.
func (s *transcriptRows) pruneSome(ctx context.Context, before int64) (int, int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("receipts: begin pruning %s: %w", s.where, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, s.q(`SELECT task_id FROM transcripts WHERE started_at < ? ORDER BY started_at LIMIT ?`), before, pruneBatch)
	if err != nil {
		return 0, 0, fmt.Errorf("receipts: find old transcripts in %s: %w", s.where, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	var lines int64
	for _, id := range ids {
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM transcript_lines WHERE task_id = ?`), id)
		if err != nil {
			return 0, 0, fmt.Errorf("receipts: prune lines of %s in %s: %w", id, s.where, err)
		}
		n, _ := res.RowsAffected()
		lines += n
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM transcripts WHERE task_id = ?`), id); err != nil {
			return 0, 0, fmt.Errorf("receipts: prune the transcript of %s in %s: %w", id, s.where, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("receipts: commit pruning %s: %w", s.where, err)
	}
	return len(ids), lines, nil
}
