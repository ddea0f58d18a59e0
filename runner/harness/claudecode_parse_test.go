package harness_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// The recorded streams in testdata/claudecode come from the real Claude
// Code CLI run by claudecode_cli_test.go against the scripted server
// (rewrite them with `go test ./runner/harness -run TestClaudeCode -args
// -claudecode.record`).

func readClaudeFixture(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "claudecode", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	return lines
}

type claudeParsed struct {
	events []harness.Event
	errs   []error
}

func parseClaude(lines [][]byte) claudeParsed {
	p := harness.NewClaudeCode("claude").NewParser()
	var out claudeParsed
	for _, l := range lines {
		evs, err := p.ParseStdout(l)
		if err != nil {
			out.errs = append(out.errs, err)
		}
		out.events = append(out.events, evs...)
	}
	return out
}

// claudeSignature writes events as "type" or "type:tool", space separated.
func claudeSignature(evs []harness.Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = string(e.Type)
		if e.Tool != "" {
			parts[i] += ":" + e.Tool
		}
	}
	return strings.Join(parts, " ")
}

func claudeStepTokens(evs []harness.Event) []harness.Tokens {
	var out []harness.Tokens
	for _, e := range evs {
		if e.Type == harness.EventStepFinish {
			out = append(out, e.Tokens)
		}
	}
	return out
}

func claudeLastResult(t *testing.T, evs []harness.Event) harness.Event {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Type != harness.EventResult {
		t.Fatalf("the last event is not the result: %s", claudeSignature(evs))
	}
	return evs[len(evs)-1]
}

// TestClaudeCodeParseRecorded replays the recorded runs. The expectations
// come from the scripts that produced them, not from the parser's output.
func TestClaudeCodeParseRecorded(t *testing.T) {
	t.Parallel()
	tok := func(in, out, cr, cw int64) harness.Tokens {
		return harness.Tokens{Input: in, Output: out, CacheRead: cr, CacheWrite: cw}
	}
	cases := []struct {
		name    string
		sig     string
		steps   []harness.Tokens
		cost    float64
		text    string
		errText string
	}{
		{
			name: "execute",
			sig: "session step_start text tool_use:Write step_finish step_start tool_use:Read step_finish " +
				"step_start tool_use:Edit step_finish step_start text tool_use:Bash step_finish step_start text step_finish result",
			steps: []harness.Tokens{tok(1000, 50, 0, 0), tok(180, 25, 900, 0), tok(200, 40, 1000, 0), tok(150, 30, 1200, 100), tok(120, 20, 1300, 0)},
			cost:  (1650*3 + 165*15 + 4400*0.30 + 100*3.75) / 1e6,
			text:  "Created hello.txt and updated the README greeting.",
		},
		{
			name: "readonly",
			sig: "session step_start text tool_use:Bash step_finish step_start tool_use:Write step_finish " +
				"step_start tool_use:Bash stall:Bash step_finish step_start text step_finish result",
			steps: []harness.Tokens{tok(900, 30, 0, 0), tok(100, 30, 0, 0), tok(100, 30, 0, 0), tok(100, 80, 0, 0)},
			cost:  (1200*3 + 170*15) / 1e6,
			text:  "## Plan\n\n1. Change the greeting in README.md.\n2. Add hello.txt.",
		},
		{
			name:  "resume",
			sig:   "session step_start text step_finish result",
			steps: []harness.Tokens{tok(600, 12, 0, 0)},
			cost:  (600*3 + 12*15) / 1e6,
			text:  "Second answer, with the first in mind.",
		},
		{
			name:    "api_error",
			sig:     "session step_start tool_use:Bash step_finish error result",
			steps:   []harness.Tokens{tok(2000, 20, 0, 0)},
			cost:    (2000*3 + 20*15) / 1e6,
			errText: "403 scripted refusal 9c1d",
		},
		{
			name:    "max_turns",
			sig:     "session step_start tool_use:Bash step_finish error result",
			steps:   []harness.Tokens{tok(100, 10, 0, 0)},
			cost:    (100*3 + 10*15) / 1e6,
			errText: "error_max_turns: Reached maximum number of turns (1)",
		},
		{
			name:    "max_budget",
			sig:     "session step_start tool_use:Bash step_finish error result",
			steps:   []harness.Tokens{tok(5000, 100, 0, 0)},
			cost:    (5000*3 + 100*15) / 1e6,
			errText: "error_max_budget_usd: Reached maximum budget ($0.01)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := readClaudeFixture(t, tc.name)
			got := parseClaude(lines)
			if len(got.errs) > 0 {
				t.Fatalf("%d parse errors, first: %v", len(got.errs), got.errs[0])
			}
			if s := claudeSignature(got.events); s != tc.sig {
				t.Errorf("events\n got %s\nwant %s", s, tc.sig)
			}
			steps := claudeStepTokens(got.events)
			if len(steps) != len(tc.steps) {
				t.Fatalf("%d steps, want %d", len(steps), len(tc.steps))
			}
			for i := range steps {
				if steps[i] != tc.steps[i] {
					t.Errorf("step %d tokens %+v, want %+v", i, steps[i], tc.steps[i])
				}
			}
			res := claudeLastResult(t, got.events)
			if !res.CostIsTotal || !claudeSameCost(res.CostUSD, tc.cost) {
				t.Errorf("result cost %v (total %v), want %v", res.CostUSD, res.CostIsTotal, tc.cost)
			}
			if tc.text != "" && res.Text != tc.text {
				t.Errorf("result text %q, want %q", res.Text, tc.text)
			}
			var errs []string
			for _, e := range got.events {
				if e.Type == harness.EventError {
					errs = append(errs, e.Text)
				}
			}
			if tc.errText == "" && len(errs) > 0 || tc.errText != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.errText)) {
				t.Errorf("error events %q, want %q", errs, tc.errText)
			}
			sess := got.events[0].SessionID
			for _, e := range got.events {
				if e.SessionID != sess || !claudeUUIDRE.MatchString(e.SessionID) {
					t.Fatalf("%s event has session %q, want %q throughout", e.Type, e.SessionID, sess)
				}
			}
		})
	}
}

// TestClaudeCodeParseWithoutStreamEvents reads the recorded execute run as
// the CLI prints it without --include-partial-messages (the same lines,
// minus the stream events): the steps, tools and result must not change;
// only the output counts fall back to message_start's placeholder.
func TestClaudeCodeParseWithoutStreamEvents(t *testing.T) {
	t.Parallel()
	var lines [][]byte
	for _, l := range readClaudeFixture(t, "execute") {
		if !bytes.Contains(l, []byte(`"type":"stream_event"`)) {
			lines = append(lines, l)
		}
	}
	got := parseClaude(lines)
	if len(got.errs) > 0 {
		t.Fatalf("parse errors: %v", got.errs)
	}
	want := "session step_start text tool_use:Write step_finish step_start tool_use:Read step_finish " +
		"step_start tool_use:Edit step_finish step_start text tool_use:Bash step_finish step_start text step_finish result"
	if s := claudeSignature(got.events); s != want {
		t.Fatalf("events\n got %s\nwant %s", s, want)
	}
	inputs := []int64{1000, 180, 200, 150, 120}
	for i, st := range claudeStepTokens(got.events) {
		if st.Input != inputs[i] || st.Output != 1 {
			t.Errorf("step %d tokens %+v, want input %d and the placeholder output 1", i, st, inputs[i])
		}
	}
	if res := claudeLastResult(t, got.events); res.Tokens.Output != 165 {
		t.Errorf("result output tokens %d, want the run's 165", res.Tokens.Output)
	}
}

// TestClaudeCodeParseLines covers single lines and short sequences: bad
// input, unknown input and the shapes the recorded runs do not show.
func TestClaudeCodeParseLines(t *testing.T) {
	t.Parallel()
	const sid = `"session_id":"2f1c1c0e-7a43-4f4e-9d1a-5b8d8e0c9a11"`
	asst := func(id, parent, content, usage string) string {
		return `{"type":"assistant","message":{"id":"` + id + `","type":"message","role":"assistant","content":` + content +
			`,"usage":` + usage + `},"parent_tool_use_id":` + parent + `,` + sid + `}`
	}
	user := func(parent, toolUseID string) string {
		return `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + toolUseID +
			`","content":"ok"}]},"parent_tool_use_id":` + parent + `,` + sid + `}`
	}
	cases := []struct {
		name  string
		lines []string
		sig   string // events of all lines
		errs  int    // lines that must fail
		check func(t *testing.T, evs []harness.Event)
	}{
		{name: "blank line", lines: []string{"", "   "}, sig: ""},
		{name: "not JSON", lines: []string{"Error: Invalid API key"}, errs: 1},
		{name: "partial line", lines: []string{`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"te`}, errs: 1},
		{name: "JSON without a type", lines: []string{`{"session_id":"x"}`}, errs: 1},
		{name: "not an object", lines: []string{`["system"]`}, errs: 1},
		{name: "unknown type", lines: []string{`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}`}, sig: ""},
		{name: "unknown system subtype with other field types", lines: []string{`{"type":"system","subtype":"hook_response","message":"x","model":{"a":1}}`}, sig: ""},
		{name: "init without session", lines: []string{`{"type":"system","subtype":"init","model":"m"}`}, errs: 1},
		{name: "assistant without message", lines: []string{`{"type":"assistant",` + sid + `}`}, errs: 1},
		{name: "assistant with string content", lines: []string{asst("msg_1", "null", `"hi"`, `{}`)}, errs: 1},
		{name: "assistant with a wrongly typed field", lines: []string{`{"type":"assistant","message":"hi"}`}, errs: 1},
		{name: "partial content block delta", lines: []string{`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hel`}, errs: 1},
		{name: "content block delta missing its last brace", lines: []string{`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`}, errs: 1},
		{name: "content block delta with text after it", lines: []string{`{"type":"stream_event","event":{"type":"content_block_stop","index":0}} {"type":"x"}`}, errs: 1},
		{name: "mismatched brackets", lines: []string{`{"type":"stream_event","event":{"type":"content_block_stop","index":[0}]}`}, errs: 1},
		{
			name: "content block events are skipped whatever their text or key order",
			lines: []string{
				`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"say \"type\":\"message_stop\" and }{]["}}}`,
				`{"event":{"index":1,"type":"content_block_start","content_block":{"type":"tool_use","id":"t","name":"Bash","input":{}}},"type":"stream_event"}`,
				` {"type":"stream_event","event":{"type":"content_block_stop","index":1}} `,
			},
			sig: "",
		},
		{
			name: "only the top-level event's type decides",
			lines: []string{
				`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_9","usage":{"input_tokens":4}}},"parent_tool_use_id":null}`,
				`{"type":"stream_event","event":{"type":"message_stop","x":{"event":{"type":"content_block_delta"}}},"parent_tool_use_id":null}`,
				`{"type":"other","event":{"type":"content_block_delta"}}`,
			},
			sig: "step_start step_finish",
		},
		{name: "stream event without event", lines: []string{`{"type":"stream_event",` + sid + `}`}, errs: 1},
		{name: "message_start without id", lines: []string{`{"type":"stream_event","event":{"type":"message_start","message":{}}}`}, errs: 1},
		{
			name: "a bad line leaves the parser usable",
			lines: []string{
				`{"type":"system","subtype":"init","model":"m",` + sid + `}`,
				`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"te`,
				asst("msg_1", "null", `[{"type":"text","text":"hi"}]`, `{"input_tokens":5,"output_tokens":2}`),
				`{"type":"result","subtype":"success","result":"hi","total_cost_usd":0.25,` + sid + `}`,
			},
			errs: 1,
			sig:  "session step_start text step_finish result",
			check: func(t *testing.T, evs []harness.Event) {
				if evs[3].Tokens.Input != 5 || evs[4].CostUSD != 0.25 || !evs[4].CostIsTotal {
					t.Errorf("events %+v", evs)
				}
			},
		},
		{
			name: "empty text blocks are not events",
			lines: []string{
				asst("msg_1", "null", `[{"type":"text","text":"  \n"},{"type":"thinking","thinking":"hmm"}]`, `{}`),
			},
			sig: "step_start",
		},
		{
			name: "result of a failed run",
			lines: []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["tool crashed","then this"],` +
				`"total_cost_usd":1.5,"usage":{"input_tokens":10,"output_tokens":3,"output_tokens_details":{"thinking_tokens":2}},` + sid + `}`},
			sig: "error result",
			check: func(t *testing.T, evs []harness.Event) {
				if evs[0].Text != "error_during_execution: tool crashed; then this" {
					t.Errorf("error text %q", evs[0].Text)
				}
				if evs[1].Tokens != (harness.Tokens{Input: 10, Output: 3, Reasoning: 2}) || evs[1].CostUSD != 1.5 {
					t.Errorf("result %+v", evs[1])
				}
			},
		},
		{
			name: "cost of this invocation, over all models",
			lines: []string{`{"type":"result","subtype":"success","result":"ok","total_cost_usd":9.5,` +
				`"model_usage_since_last_result":{"claude-sonnet-4-5":{"costUSD":0.25},"claude-haiku-4-5":{"costUSD":0.125}},` + sid + `}`},
			sig: "result",
			check: func(t *testing.T, evs []harness.Event) {
				if evs[0].CostUSD != 0.375 || !evs[0].CostIsTotal {
					t.Errorf("result cost %v, want 0.375 (not the session's 9.5)", evs[0].CostUSD)
				}
			},
		},
		{
			name: "synthetic messages are not steps",
			lines: []string{
				`{"type":"assistant","message":{"id":"u1","model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 overloaded"}]},"is_api_error_message":true,` + sid + `}`,
				`{"type":"assistant","message":{"id":"u2","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}]},` + sid + `}`,
				`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 overloaded","total_cost_usd":0,` + sid + `}`,
			},
			sig: "error text result",
		},
		{
			name:  "API error reported as a successful subtype",
			lines: []string{`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500 boom","total_cost_usd":0,` + sid + `}`},
			sig:   "error result",
			check: func(t *testing.T, evs []harness.Event) {
				if evs[0].Text != "API Error: 500 boom" {
					t.Errorf("error text %q", evs[0].Text)
				}
			},
		},
		{
			name: "parallel subagents keep their own steps",
			lines: []string{
				asst("msg_main", "null", `[{"type":"tool_use","id":"toolu_a","name":"Agent","input":{}},{"type":"tool_use","id":"toolu_b","name":"Agent","input":{}}]`, `{"input_tokens":100,"output_tokens":10}`),
				user("null", "ignored-no-such-call"),
				asst("msg_a1", `"toolu_a"`, `[{"type":"text","text":"A looks"}]`, `{"input_tokens":10,"output_tokens":1}`),
				asst("msg_b1", `"toolu_b"`, `[{"type":"text","text":"B looks"}]`, `{"input_tokens":20,"output_tokens":2}`),
				asst("msg_a1", `"toolu_a"`, `[{"type":"tool_use","id":"toolu_a1","name":"Read","input":{"file_path":"/a"}}]`, `{"input_tokens":10,"output_tokens":1}`),
				user(`"toolu_a"`, "toolu_a1"),
				asst("msg_a2", `"toolu_a"`, `[{"type":"text","text":"A done"}]`, `{"input_tokens":30,"output_tokens":3}`),
				user("null", "toolu_a"),
				`{"type":"result","subtype":"success","result":"both done","total_cost_usd":0.5,` + sid + `}`,
			},
			sig: "step_start tool_use:Agent tool_use:Agent step_finish step_start text step_start text tool_use:Read " +
				"step_finish step_start text step_finish step_finish result",
			check: func(t *testing.T, evs []harness.Event) {
				var sum int64
				for _, tk := range claudeStepTokens(evs) {
					sum += tk.Input
				}
				if sum != 100+10+20+30 {
					t.Errorf("steps count %d input tokens, want each message once: 160", sum)
				}
			},
		},
		{
			name: "a denied call names the call",
			lines: []string{
				asst("msg_1", "null", `[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"rm -rf /"}}]`, `{}`),
				`{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"toolu_1","decision_reason":"no approval surface","message":"Permission denied"}`,
			},
			sig: "step_start tool_use:Bash stall:Bash",
			check: func(t *testing.T, evs []harness.Event) {
				if s := evs[2]; s.Text != `Bash denied {"command":"rm -rf /"}: no approval surface` || s.ToolInput != `{"command":"rm -rf /"}` {
					t.Errorf("stall %+v", s)
				}
			},
		},
		{
			name: "stream events close the step at message_stop only",
			lines: []string{
				`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":7,"output_tokens":1}}},"parent_tool_use_id":null}`,
				asst("msg_1", "null", `[{"type":"tool_use","id":"toolu_1","name":"Nope","input":{}}]`, `{"input_tokens":7,"output_tokens":1}`),
				user("null", "toolu_1"),
				`{"type":"stream_event","event":{"type":"content_block_stop","index":0},"parent_tool_use_id":null}`,
				`{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}},"parent_tool_use_id":null}`,
				`{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":null}`,
			},
			sig: "step_start tool_use:Nope step_finish",
			check: func(t *testing.T, evs []harness.Event) {
				if tk := evs[2].Tokens; tk.Input != 7 || tk.Output != 42 {
					t.Errorf("step tokens %+v, want 7 in and 42 out", tk)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := make([][]byte, len(tc.lines))
			for i, l := range tc.lines {
				lines[i] = []byte(l)
			}
			got := parseClaude(lines)
			if len(got.errs) != tc.errs {
				t.Fatalf("%d lines failed (%v), want %d", len(got.errs), got.errs, tc.errs)
			}
			for _, err := range got.errs {
				if !strings.HasPrefix(err.Error(), "claude-code: ") {
					t.Errorf("error %q does not say where it comes from", err)
				}
			}
			if s := claudeSignature(got.events); s != tc.sig {
				t.Fatalf("events\n got %q\nwant %q", s, tc.sig)
			}
			if tc.check != nil {
				tc.check(t, got.events)
			}
		})
	}
}

// TestClaudeCodeParseStderr: stderr never yields events (see ParseStderr).
func TestClaudeCodeParseStderr(t *testing.T) {
	t.Parallel()
	p := harness.NewClaudeCode("claude").NewParser()
	for _, l := range []string{"", "Error: Invalid API key", "warning: something"} {
		if evs := p.ParseStderr([]byte(l)); len(evs) != 0 {
			t.Errorf("ParseStderr(%q) = %+v", l, evs)
		}
	}
}

// TestClaudeCodeFixturesAreRealRuns guards the fixtures against hand
// edits: every line is JSON, and each run starts with the CLI's init line
// naming the pinned version and ends with its result.
func TestClaudeCodeFixturesAreRealRuns(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "claudecode", "*.jsonl"))
	if err != nil || len(files) < 6 {
		t.Fatalf("fixtures: %v, %v", files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		lines := readClaudeFixture(t, name)
		var first, last struct {
			Type, Subtype string
			Version       string `json:"claude_code_version"`
		}
		if err := json.Unmarshal(lines[0], &first); err != nil || first.Type != "system" || first.Subtype != "init" || first.Version != "2.1.330" {
			t.Errorf("%s: first line %+v, %v; want the init line of 2.1.330", name, first, err)
		}
		if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil || last.Type != "result" {
			t.Errorf("%s: last line %+v, %v; want the result", name, last, err)
		}
	}
}

// BenchmarkClaudeCodeParse parses every recorded line (real runs: mostly
// stream events, with the assistant, user and result lines among them)
// with a fresh parser per pass, as each run gets one. The floor is
// json.Valid over the same lines, the least a JSON-lines reader does; it
// is timed between the parser's passes, outside the benchmark timer, so
// that both see the same load on a shared machine, and x_floor is the
// parser's time over the floor's. Goal: >= 100k events/s on one core.
func BenchmarkClaudeCodeParse(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("testdata", "claudecode", "*.jsonl"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no fixtures: %v", err)
	}
	var lines [][]byte
	var size int64
	for _, f := range files {
		for _, l := range readClaudeFixture(b, strings.TrimSuffix(filepath.Base(f), ".jsonl")) {
			lines = append(lines, l)
			size += int64(len(l))
		}
	}
	h := harness.NewClaudeCode("claude")
	var floor time.Duration
	events, passes := 0, 0
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		p := h.NewParser()
		for _, l := range lines {
			evs, err := p.ParseStdout(l)
			if err != nil {
				b.Fatal(err)
			}
			events += len(evs)
		}
		passes++

		b.StopTimer()
		start := time.Now()
		for _, l := range lines {
			if !json.Valid(l) {
				b.Fatalf("fixture line is not JSON: %.80s", l)
			}
		}
		floor += time.Since(start)
		b.StartTimer()
	}
	elapsed := b.Elapsed()
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(passes*len(lines))/elapsed.Seconds(), "lines/s")
	b.ReportMetric(float64(elapsed)/float64(floor), "x_floor")
}

// TestClaudeCodeParseEveryPartialLine cuts every recorded line at every
// byte: each strict prefix is a partial line and must be an error, on
// whichever path (skipped stream event or full parse) the line takes.
func TestClaudeCodeParseEveryPartialLine(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "claudecode", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	p := harness.NewClaudeCode("claude").NewParser()
	cuts := 0
	for _, f := range files {
		for _, line := range readClaudeFixture(t, strings.TrimSuffix(filepath.Base(f), ".jsonl")) {
			for n := 1; n < len(line); n++ {
				prefix := line[:n]
				if len(bytes.TrimSpace(prefix)) == 0 {
					continue
				}
				cuts++
				if evs, err := p.ParseStdout(prefix); err == nil {
					t.Fatalf("%s: the first %d of %d bytes parsed without error (%d events): %.120s", f, n, len(line), len(evs), prefix)
				}
			}
		}
	}
	t.Logf("%d partial lines rejected", cuts)
}

// FuzzClaudeCodeParse: no input may panic the parser, and a line that is
// not even balanced JSON must be an error.
func FuzzClaudeCodeParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "claudecode", "*.jsonl"))
	for _, file := range files {
		for _, l := range readClaudeFixture(f, strings.TrimSuffix(filepath.Base(file), ".jsonl")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"stream_event","event":{"type":"content_block_delta"`))
	f.Fuzz(func(t *testing.T, line []byte) {
		p := harness.NewClaudeCode("claude").NewParser()
		_, err := p.ParseStdout(line)
		if err == nil && len(bytes.TrimSpace(line)) > 0 && bytes.Count(line, []byte("{")) == 0 {
			t.Fatalf("%q parsed without error", line)
		}
		_ = p.ParseStderr(line)
	})
}
