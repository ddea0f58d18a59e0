package follow

import (
	"slices"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestTokenPermissionByMode(t *testing.T) {
	t.Parallel()
	want := map[dispatch.Mode]string{
		dispatch.ModePlan: "read", dispatch.ModeTask: "read", dispatch.ModePreview: "", dispatch.ModeReview: "read", dispatch.ModeFix: "write", dispatch.ModeSuggest: "read",
		dispatch.ModeExecute: "write", dispatch.ModeRevise: "write", dispatch.ModeRebase: "write", dispatch.ModeContinue: "write",
	}
	for _, m := range dispatch.Modes {
		if got := TokenPermission(m); got != want[m] {
			t.Errorf("%s run: contents:%s, want contents:%s", m, got, want[m])
		}
	}
}

// Superseded tokens are those minted before the one the sandbox holds; a
// token minted but not (yet) delivered is never what replaces it.
func TestRunTokensSuperseded(t *testing.T) {
	t.Parallel()
	var rt runTokens
	rt.add("T-1", "a")
	rt.delivered("T-1", "a")
	if got := rt.takeSuperseded("T-1"); len(got) != 0 {
		t.Fatalf("nothing is superseded yet, got %v", got)
	}
	rt.add("T-1", "b")
	rt.add("T-2", "x")
	if got := rt.takeSuperseded("T-1"); len(got) != 0 {
		t.Fatalf("b is not delivered: a must stay, got %v", got)
	}
	rt.add("T-1", "c")
	rt.delivered("T-1", "c")
	if got := rt.takeSuperseded("T-1"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("superseded %v, want [a b]", got)
	}
	if got := rt.take("T-1"); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("take %v, want [c]", got)
	}
	if got := rt.take("T-1"); len(got) != 0 {
		t.Fatalf("a second take returned %v", got)
	}
	if got := rt.take("T-2"); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("another run's tokens: %v", got)
	}
}

// A token read back from the backend is remembered only for a run this
// process knows nothing about.
func TestRunTokensAdopt(t *testing.T) {
	t.Parallel()
	var rt runTokens
	if !rt.adopt("T-1", "old") || rt.adopt("T-1", "other") {
		t.Fatal("adopt must take the first token of an unknown run only")
	}
	rt.add("T-2", "mine")
	if rt.adopt("T-2", "theirs") {
		t.Fatal("adopt replaced a token this process minted")
	}
	rt.add("T-1", "new")
	rt.delivered("T-1", "new")
	if got := rt.takeSuperseded("T-1"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("the adopted token is superseded by a refresh: got %v", got)
	}
}
