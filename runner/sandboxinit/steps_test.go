package sandboxinit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Parallel steps all run; the first failure stops the others through the
// context and is what is reported, not the "context canceled" it caused.
func TestStepsParallelReportsTheCause(t *testing.T) {
	t.Parallel()
	st := newSteps(time.Now())
	err := st.parallel(context.Background(), map[string]func(context.Context) error{
		"fails": func(context.Context) error { return errors.New("iptables-restore: no owner match") },
		"waits": func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		},
		"fine": func(context.Context) error { return nil },
	})
	if err == nil || err.Error() != "iptables-restore: no owner match" {
		t.Fatalf("parallel = %v, want only the cause", err)
	}
	got := st.String()
	for _, want := range []string{"fails@", "(failed)", "waits@", "fine@"} {
		if !strings.Contains(got, want) {
			t.Errorf("steps %q lack %q", got, want)
		}
	}
}

// A nil steps (a sandbox a test builds) runs the step and records nothing.
func TestNilStepsRuns(t *testing.T) {
	t.Parallel()
	var st *steps
	ran := false
	if err := st.do("x", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("do = %v, ran %v", err, ran)
	}
	if st.String() != "" {
		t.Error("a nil steps has timings")
	}
}
