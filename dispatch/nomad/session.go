package nomad

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A plan run's agent session outlives its allocation: Nomad collects the
// allocation's files with the job, and any bot replica may handle the
// /approve. So the bot copies the archive out of alloc/data into Nomad
// Variables (one head with its digest and the chunks of 40 KiB it is cut
// into, each Variable under Nomad's 64 KiB), and hands it to the execute
// run in its work order, like the docker backend does. The head is written
// last: a head that exists names chunks that exist.

const (
	// SessionPrefix holds one head per kept session, SessionPrefix+<task>,
	// and its chunks, SessionPrefix+<task>/<n>. The bot's ACL policy needs
	// variables read, list, write and destroy on it.
	SessionPrefix = "sandbox-bot/session/"
	// SessionPath is where Nomad's file system API finds a run's archive.
	SessionPath = "alloc/data/" + dispatch.SessionArchiveFile
	// MaxSessionBytes is the largest archive the Nomad backend carries: it
	// travels in the execute job's work order, which Nomad keeps in its
	// Raft log with the job. A larger session starts fresh, and says so.
	MaxSessionBytes = 512 << 10
	// sessionChunkBytes of archive are 54 KiB in base64: one Variable each,
	// under the 64 KiB Nomad allows.
	sessionChunkBytes = 40 << 10
	// sessionMaxAge is how long a plan waits for /approve with its session
	// kept (as long as the docker backend keeps one).
	sessionMaxAge = 14 * 24 * time.Hour
)

// sessions carry a plan run's agent session to its execute run through
// Variables (dispatch.SessionKeeper), and bound what a job may carry
// (dispatch.ImageCarrier).
type sessions struct {
	*shared
}

// KeepSession implements dispatch.SessionKeeper: it reads the archive of
// the ended run from its allocation (untrusted, capped) and writes it to
// Variables. An archive over MaxSessionBytes is kept as a note that says
// so, which the execute run's receipt shows.
func (b *sessions) KeepSession(ctx context.Context, taskID string) (bool, error) {
	if !dispatch.ValidTaskID(taskID) {
		return false, fmt.Errorf("keep session: task id %q is not of the form T-XXXXXXXX", taskID)
	}
	v, err := b.endedView(ctx, "session", taskID)
	if err != nil {
		return false, err
	}
	a := v.latest()
	if a == nil {
		return false, nil
	}
	archive, err := b.catCapped(ctx, &api.Allocation{ID: a.ID, NodeID: a.NodeID, Namespace: b.o.Namespace}, SessionPath, dispatch.MaxSessionArchiveBytes)
	if errors.Is(err, dispatch.ErrNoResult) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	b.pruneSessions(ctx)
	head := api.VariableItems{"saved_at": strconv.FormatInt(time.Now().Unix(), 10)}
	if len(archive) > MaxSessionBytes {
		head["missing"] = fmt.Sprintf("the plan run's session archive is %d KiB, over the %d KiB the Nomad backend carries", len(archive)>>10, MaxSessionBytes>>10)
	} else {
		sum := sha256.Sum256(archive)
		head["sha256"], head["bytes"] = hex.EncodeToString(sum[:]), strconv.Itoa(len(archive))
		n := 0
		for off := 0; off < len(archive); off += sessionChunkBytes {
			chunk := archive[off:min(off+sessionChunkBytes, len(archive))]
			if err := b.putVar(ctx, sessionChunkPath(taskID, n), api.VariableItems{"data": base64.StdEncoding.EncodeToString(chunk)}); err != nil {
				return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
			}
			n++
		}
		head["chunks"] = strconv.Itoa(n)
	}
	if err := b.putVar(ctx, SessionPrefix+taskID, head); err != nil {
		return false, fmt.Errorf("keep the session of %s: %w", taskID, err)
	}
	return head["missing"] == "", nil
}

// KeptSession implements dispatch.SessionKeeper: the archive, checked
// against the digest its head recorded.
func (b *sessions) KeptSession(ctx context.Context, taskID string) ([]byte, error) {
	if !dispatch.ValidTaskID(taskID) {
		return nil, fmt.Errorf("session of %q: not a task id: %w", taskID, dispatch.ErrNotFound)
	}
	head, _, err := b.c.Variables().Peek(SessionPrefix+taskID, b.stateQ(ctx))
	if err != nil {
		return nil, fmt.Errorf("session of %s: read variable %s: %w", taskID, SessionPrefix+taskID, err)
	}
	if head == nil {
		return nil, fmt.Errorf("no session kept for %s: %w", taskID, dispatch.ErrNotFound)
	}
	if why := head.Items["missing"]; why != "" {
		return nil, &dispatch.SessionNotKept{Reason: why}
	}
	chunks, err := strconv.Atoi(head.Items["chunks"])
	if err != nil || chunks < 1 || chunks*sessionChunkBytes > MaxSessionBytes+sessionChunkBytes {
		return nil, fmt.Errorf("session of %s: head %s names %q chunks: %w", taskID, SessionPrefix+taskID, head.Items["chunks"], dispatch.ErrBadSession)
	}
	var archive bytes.Buffer
	for n := range chunks {
		v, _, err := b.c.Variables().Peek(sessionChunkPath(taskID, n), b.stateQ(ctx))
		if err != nil || v == nil {
			return nil, fmt.Errorf("session of %s: chunk %d of %d is missing (%v): %w", taskID, n, chunks, err, dispatch.ErrBadSession)
		}
		chunk, err := base64.StdEncoding.DecodeString(v.Items["data"])
		if err != nil {
			return nil, fmt.Errorf("session of %s: chunk %d: %w: %w", taskID, n, err, dispatch.ErrBadSession)
		}
		archive.Write(chunk)
	}
	sum := sha256.Sum256(archive.Bytes())
	if hex.EncodeToString(sum[:]) != head.Items["sha256"] {
		return nil, fmt.Errorf("session of %s: the chunks do not add up to the digest kept with them: %w", taskID, dispatch.ErrBadSession)
	}
	return archive.Bytes(), nil
}

func sessionChunkPath(taskID string, n int) string {
	return SessionPrefix + taskID + "/" + strconv.Itoa(n)
}

func (b *sessions) putVar(ctx context.Context, path string, items api.VariableItems) error {
	_, _, err := b.c.Variables().Update(&api.Variable{Namespace: b.o.StateNamespace, Path: path, Items: items}, b.stateW(ctx))
	if err != nil {
		return fmt.Errorf("write variable %s: %w", path, err)
	}
	return nil
}

// pruneSessions removes the sessions kept longer than sessionMaxAge, their
// chunks first, so a head never names a chunk that is gone.
func (b *sessions) pruneSessions(ctx context.Context) {
	metas, _, err := b.c.Variables().PrefixList(SessionPrefix, b.stateQ(ctx))
	if err != nil {
		b.log.Warn().Err(err).Msg("list kept agent sessions")
		return
	}
	old := map[string]bool{}
	for _, m := range metas {
		task := strings.TrimPrefix(m.Path, SessionPrefix)
		if !strings.Contains(task, "/") && time.Since(time.Unix(0, m.ModifyTime)) > sessionMaxAge {
			old[task] = true
		}
	}
	for _, m := range metas {
		task, _, isChunk := strings.Cut(strings.TrimPrefix(m.Path, SessionPrefix), "/")
		if isChunk && old[task] {
			_, _ = b.c.Variables().Delete(m.Path, b.stateW(ctx))
		}
	}
	for task := range old {
		_, _ = b.c.Variables().Delete(SessionPrefix+task, b.stateW(ctx))
	}
}

// catCapped reads file of alloc, which the sandbox wrote, up to limit
// bytes: more is ErrBadSession, a missing file ErrNoResult.
func (b *sessions) catCapped(ctx context.Context, alloc *api.Allocation, file string, limit int) ([]byte, error) {
	rc, err := b.c.AllocFS().Cat(alloc, file, b.qopts(ctx))
	if err != nil {
		if isNotFound(err) || strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "Unknown allocation") {
			return nil, fmt.Errorf("allocation %s has no %s: %w", alloc.ID, file, dispatch.ErrNoResult)
		}
		return nil, fmt.Errorf("read %s of allocation %s: %w", file, alloc.ID, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s of allocation %s: %w", file, alloc.ID, err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("%s of allocation %s is over the %d-byte cap: %w", file, alloc.ID, limit, dispatch.ErrBadSession)
	}
	return raw, nil
}

// MaxImageBytes implements dispatch.ImageCarrier: the images of a run's
// work order travel inside its job, like a session archive, and are held
// to the same bound.
func (b *sessions) MaxImageBytes() int64 { return MaxSessionBytes }
