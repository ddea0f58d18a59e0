package modeltest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
)

// retryKey names a request by the agent's session and the conversation it
// carries.
type retryKey struct {
	session      string
	conversation [sha256.Size]byte
}

// newRetryKey keys a request of session (its header; empty when the agent
// sent none) whose recorded messages are messages.
func newRetryKey(session string, messages any) retryKey {
	b, err := json.Marshal(messages)
	if err != nil {
		// The recorded messages are strings and bytes: this cannot fail.
		panic(fmt.Sprintf("modeltest: encode the recorded messages: %v", err))
	}
	return retryKey{session: session, conversation: sha256.Sum256(b)}
}

// lastTurn is the request that last consumed a plain turn. An agent that
// gives up on a response it did not finish reading (OpenCode and Claude
// Code retry a stream whose connection closed) sends the same conversation
// again in the same session; a real model answers it afresh, so the script
// answers it with the same turn rather than letting the retry eat the next
// one. Retries after errors, stalls and delays go on down the script: those
// are the scenarios that make an agent retry.
type lastTurn struct {
	key  retryKey
	turn int
}

// repeatedBy reports whether a request keyed k is a retry of l: the same
// conversation in the same session (a request without one never is).
func (l lastTurn) repeatedBy(k retryKey) bool {
	return k.session != "" && k == l.key
}
