package receipts

import (
	"context"
	"fmt"
)

// Copied is what a Copy added to its target, and what it found there
// already.
type Copied struct {
	Receipts, ReceiptsThere int
	Transcripts             int
	Lines, LinesThere       int
}

func (c Copied) String() string {
	return fmt.Sprintf("%d receipts copied (%d were there already), %d transcripts with %d lines copied (%d lines were there already)",
		c.Receipts, c.ReceiptsThere, c.Transcripts, c.Lines, c.LinesThere)
}

// copyPage is how many receipts, heads or lines one read of the source
// returns.
const copyPage = MaxPageSize

// Copy copies what from keeps into to (an operator moving from one
// machine's SQLite to the PostgreSQL of several replicas): every receipt
// and every transcript. What to holds already stays as it is, so a second
// Copy adds nothing, and a bot already writing to to loses nothing.
func Copy(ctx context.Context, from, to Store) (Copied, error) {
	var c Copied
	for offset := 0; ; offset += copyPage {
		page, err := from.List(ctx, Filter{}, offset, copyPage)
		if err != nil {
			return c, err
		}
		added, err := to.Import(ctx, page.Runs)
		if err != nil {
			return c, err
		}
		c.Receipts, c.ReceiptsThere = c.Receipts+added, c.ReceiptsThere+len(page.Runs)-added
		if len(page.Runs) < copyPage {
			break
		}
	}
	for after := ""; ; {
		heads, err := from.Heads(ctx, after, copyPage)
		if err != nil {
			return c, err
		}
		for _, h := range heads {
			added, there, err := copyTranscript(ctx, from, to, h)
			if err != nil {
				return c, err
			}
			c.Lines, c.LinesThere = c.Lines+added, c.LinesThere+there
			if added > 0 {
				c.Transcripts++
			}
			after = h.TaskID
		}
		if len(heads) < copyPage {
			return c, nil
		}
	}
}

// copyTranscript copies one run's head and lines; the head is whole only
// once its lines are there, so a copy that stops half-way never marks a
// half-copied transcript whole.
func copyTranscript(ctx context.Context, from, to Store, h Head) (added, there int, err error) {
	whole := h.Whole
	h.Whole = false
	if err := to.ImportHead(ctx, h); err != nil {
		return 0, 0, err
	}
	for after := 0; ; {
		lines, err := from.Lines(ctx, h.TaskID, after, copyPage)
		if err != nil {
			return added, there, err
		}
		n, err := to.Append(ctx, h.TaskID, lines)
		if err != nil {
			return added, there, err
		}
		added, there = added+n, there+len(lines)-n
		if len(lines) < copyPage {
			break
		}
		after = lines[len(lines)-1].Seq
	}
	if whole {
		err = to.Finish(ctx, h.TaskID)
	}
	return added, there, err
}
