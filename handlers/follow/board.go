package follow

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/go-github/v62/github"
	lru "github.com/hashicorp/golang-lru"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// board is what this replica saw of the runs it followed: the last
// progress line, the check run, and how the run ended. /status reads it
// for what GitHub's comments do not say (stage, cost so far, the check
// run). It is memory only and bounded: after a restart, or for a run
// another replica follows, /status says what the bot's comments say.
type board struct {
	webURL string
	mu     sync.Mutex
	runs   *lru.Cache // task id -> Seen
}

// Seen is one run as this replica last saw it.
type Seen struct {
	Stage    string
	Message  string
	CostUSD  float64
	CheckURL string
	Ended    bool
}

const boardSize = 4096

func newBoard(webURL string) *board {
	runs, _ := lru.New(boardSize) // only fails for a size <= 0
	return &board{webURL: strings.TrimSuffix(webURL, "/"), runs: runs}
}

func (b *board) edit(taskID string, fn func(*Seen)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var e Seen
	if v, ok := b.runs.Get(taskID); ok {
		e = v.(Seen)
	}
	fn(&e)
	b.runs.Add(taskID, e)
}

func (b *board) get(taskID string) (Seen, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.runs.Get(taskID)
	if !ok {
		return Seen{}, false
	}
	return v.(Seen), true
}

func (b *board) progress(meta dispatch.Meta, ev dispatch.Progress) {
	b.edit(meta.TaskID, func(e *Seen) {
		e.Stage, e.Message = ev.Stage, oneLine(ev.Message)
		e.CostUSD = max(e.CostUSD, ev.CostUSD)
	})
}

// checkRun records where the run's check run is shown: GitHub's html_url,
// or the address GitHub gives check runs when an API leaves it out.
func (b *board) checkRun(meta dispatch.Meta, cr *github.CheckRun) {
	url := cr.GetHTMLURL()
	if url == "" {
		url = fmt.Sprintf("%s/%s/runs/%d", b.webURL, meta.Repo, cr.GetID())
	}
	b.edit(meta.TaskID, func(e *Seen) { e.CheckURL = url })
}

func (b *board) ended(meta dispatch.Meta, res *dispatch.Result) {
	b.edit(meta.TaskID, func(e *Seen) {
		e.Ended = true
		if res != nil {
			e.CostUSD = max(e.CostUSD, res.TokenUsage.TotalCostUSD)
		}
	})
}
