package nomad

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// LockPrefix is where the per-issue locks live. The bot's ACL policy needs
// variables write and destroy on it.
const LockPrefix = "sandbox-bot/locks/"

// maxVarPath is Nomad's limit on variable paths.
const maxVarPath = 128

// lockVars are the per-issue locks (dispatch.Locker, dispatch.LockLister),
// one Variable each under LockPrefix in the bot's state namespace.
type lockVars struct {
	*cluster
}

// LockPath maps a lock key (owner/repo#N) to a Variable path. Variable
// paths allow only [a-zA-Z0-9-_~/], so other bytes are written as ~XX; keys
// are lower-cased because GitHub names are case-insensitive. A key too long
// for Nomad's 128 characters becomes a hash.
func LockPath(key string) string {
	var sb strings.Builder
	sb.WriteString(LockPrefix)
	for _, c := range []byte(strings.ToLower(key)) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '/':
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, "~%02x", c)
		}
	}
	p := strings.TrimRight(sb.String(), "/")
	if len(p) > maxVarPath || strings.Contains(p, "//") {
		sum := sha256.Sum256([]byte(strings.ToLower(key)))
		p = LockPrefix + "~h/" + hex.EncodeToString(sum[:20])
	}
	return p
}

// Lock implements dispatch.Locker with a Variable created under
// check-and-set index 0: of two replicas racing for the same issue, Nomad
// lets exactly one create it.
func (b *lockVars) Lock(ctx context.Context, key, holder string) (string, error) {
	if key == "" || holder == "" {
		return "", fmt.Errorf("lock: key %q and holder %q must both be set", key, holder)
	}
	path := LockPath(key)
	for attempt := 0; attempt < 3; attempt++ {
		v := &api.Variable{Namespace: b.o.StateNamespace, Path: path, Items: api.VariableItems{
			"holder": holder,
			"key":    key,
			"since":  b.o.Clock().UTC().Format("2006-01-02T15:04:05Z07:00"),
		}}
		_, _, err := b.c.Variables().CheckedCreate(v, b.stateW(ctx))
		if err == nil {
			b.log.Debug().Str("lock", key).Str("task_id", holder).Msg("issue lock taken")
			return holder, nil
		}
		var cas api.ErrCASConflict
		if !errors.As(err, &cas) {
			return "", fmt.Errorf("lock %s (variable %s): %w", key, path, err)
		}
		if cur := cas.Conflict; cur != nil && cur.Items["holder"] != "" {
			if cur.Items["holder"] == holder {
				return holder, nil
			}
			return cur.Items["holder"], fmt.Errorf("lock %s is held by %s: %w", key, cur.Items["holder"], dispatch.ErrLocked)
		}
		// Released between our write and the conflict answer: try again.
	}
	return "", fmt.Errorf("lock %s (variable %s): changing too fast to take", key, path)
}

// Unlock implements dispatch.Locker. It deletes the Variable with
// check-and-set on the index it read, so it never removes a lock another
// holder took in between.
func (b *lockVars) Unlock(ctx context.Context, key, holder string) error {
	path := LockPath(key)
	for attempt := 0; attempt < 3; attempt++ {
		v, _, err := b.c.Variables().Peek(path, b.stateQ(ctx))
		if err != nil {
			return fmt.Errorf("unlock %s (variable %s): %w", key, path, err)
		}
		if v == nil {
			return nil
		}
		if v.Items["holder"] != holder {
			b.log.Debug().Str("lock", key).Str("task_id", holder).Str("holder", v.Items["holder"]).Msg("not releasing a lock held by another task")
			return nil
		}
		_, err = b.c.Variables().CheckedDelete(path, v.ModifyIndex, b.stateW(ctx))
		if err == nil {
			b.log.Debug().Str("lock", key).Str("task_id", holder).Msg("issue lock released")
			return nil
		}
		var cas api.ErrCASConflict
		if !errors.As(err, &cas) {
			return fmt.Errorf("unlock %s (variable %s): %w", key, path, err)
		}
	}
	return fmt.Errorf("unlock %s (variable %s): changing too fast to release", key, path)
}

// Holder implements dispatch.Locker by reading the Variable without taking
// it.
func (b *lockVars) Holder(ctx context.Context, key string) (string, error) {
	path := LockPath(key)
	v, _, err := b.c.Variables().Peek(path, b.stateQ(ctx))
	if err != nil {
		return "", fmt.Errorf("lock holder of %s (variable %s): %w", key, path, err)
	}
	if v == nil {
		return "", nil
	}
	return v.Items["holder"], nil
}
