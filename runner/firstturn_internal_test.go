package runner

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/gateway"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

type reported struct {
	pr   dispatch.Progress
	d    time.Duration
	sign string
}

func recordingTurn(started time.Time) (*firstTurn, *[]reported) {
	var got []reported
	return &firstTurn{stage: "agent", started: started, report: func(pr dispatch.Progress, d time.Duration, sign string) {
		got = append(got, reported{pr, d, sign})
	}}, &got
}

func TestFirstTurnReportsTheFirstStepStartOnce(t *testing.T) {
	started := time.Now().Add(-3 * time.Second)
	f, got := recordingTurn(started)
	f.see(harness.Event{Type: harness.EventSession, Time: started.Add(time.Second)})
	if len(*got) != 0 {
		t.Fatalf("a session event reported: %+v", *got)
	}
	f.see(harness.Event{Type: harness.EventStepStart, Time: started.Add(2 * time.Second)})
	f.see(harness.Event{Type: harness.EventStepStart, Time: started.Add(2500 * time.Millisecond)})
	if len(*got) != 1 {
		t.Fatalf("reported %d times, want once: %+v", len(*got), *got)
	}
	r := (*got)[0]
	if r.d != 2*time.Second || r.pr.Stage != "agent" || !r.pr.Time.Equal(started.Add(2*time.Second)) || r.sign != signStepStart {
		t.Fatalf("first step start = %+v", r)
	}
	if want := "agent's first model request 2.0s after the agent started (" + signStepStart + ")"; r.pr.Message != want {
		t.Fatalf("message = %q, want %q", r.pr.Message, want)
	}
}

// A CLI's own stamp that cannot be right (before the exec, in the future)
// gives way to the runner's clock.
func TestFirstTurnDistrustsAStampOutsideTheRun(t *testing.T) {
	for _, at := range []time.Time{time.Now().Add(-time.Hour), time.Now().Add(time.Hour)} {
		f, got := recordingTurn(time.Now().Add(-time.Second))
		f.see(harness.Event{Type: harness.EventStepStart, Time: at})
		if len(*got) != 1 || (*got)[0].d < time.Second || (*got)[0].d > time.Minute || !strings.HasPrefix((*got)[0].pr.Message, firstRequestMessage) {
			t.Fatalf("stamp %s: %+v", at, *got)
		}
	}
}

// With a model gateway in the environment, the request it forwards is the
// sign, before any step start.
func TestFirstTurnTakesTheGatewaysRequest(t *testing.T) {
	g, err := gateway.New(dispatch.GatewayConfig{Providers: []dispatch.GatewayProvider{{Name: "oa", BaseURL: "http://127.0.0.1:1/v1", API: dispatch.APIOpenAI}}}, gateway.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := gateway.Serve(ctx, g, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	f, got := recordingTurn(started)
	wait := f.watchGateway(ctx, []string{dispatch.EnvModelGateway + "=" + srv.URL})
	// The provider does not answer (502): the request still left.
	resp, err := http.Post(srv.URL+"/oa/chat/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wait()
	f.see(harness.Event{Type: harness.EventStepStart, Time: time.Now()})
	if len(*got) != 1 || (*got)[0].sign != signGateway || (*got)[0].pr.Time.Before(started) {
		t.Fatalf("reported %+v, want the gateway's request once", *got)
	}
}
