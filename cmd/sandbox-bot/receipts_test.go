package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/app/receipts/receiptstest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// An operator who outgrows one machine copies what the bot kept in SQLite
// into the PostgreSQL database the replicas will share: the command copies
// every receipt and transcript, and run again it copies nothing twice and
// leaves the same rows.
func TestReceiptsCopyTwice(t *testing.T) {
	t.Parallel()
	bin := buildBot(t)
	url := testenv.Postgres(t)
	data := t.TempDir()
	src, err := receipts.OpenSQLite(filepath.Join(data, "receipts"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := receiptstest.Seed(t, src)
	if err := src.Begin(ctx, receipts.Head{TaskID: runs[0].TaskID, Repo: runs[0].Repo, RepoID: runs[0].RepoID, Mode: runs[0].Mode, Title: "t"}); err != nil {
		t.Fatal(err)
	}
	var lines []receipts.Line
	for i := 1; i <= 450; i++ {
		lines = append(lines, receipts.Line{Seq: i, Data: fmt.Appendf(nil, `{"seq":%d,"stage":"agent"}`, i)})
	}
	if _, err := src.Append(ctx, runs[0].TaskID, lines); err != nil {
		t.Fatal(err)
	}
	if err := src.Finish(ctx, runs[0].TaskID); err != nil {
		t.Fatal(err)
	}
	src.Close()

	copyOnce := func() string {
		t.Helper()
		cmd := exec.Command(bin, "receipts", "copy", "--from", data, "--to", url)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("receipts copy: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := copyOnce(); !strings.Contains(out, "5 receipts copied (0 were there already), 1 transcripts with 450 lines copied") {
		t.Errorf("first copy says:\n%s", out)
	}
	if out := copyOnce(); !strings.Contains(out, "0 receipts copied (5 were there already), 0 transcripts with 0 lines copied (450 lines were there already)") {
		t.Errorf("second copy says:\n%s", out)
	}
	dst, err := receipts.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	p, err := dst.List(ctx, receipts.Filter{}, 0, 100)
	if err != nil || p.Total != len(runs) {
		t.Fatalf("receipts in PostgreSQL after two copies: %d (%v), want %d", p.Total, err, len(runs))
	}
	copied := map[string]receipts.Run{}
	for _, r := range p.Runs {
		copied[r.TaskID] = r
	}
	for _, r := range runs {
		if copied[r.TaskID] != r {
			t.Errorf("copied %s = %+v, want %+v", r.TaskID, copied[r.TaskID], r)
		}
	}
	got, err := dst.Lines(ctx, runs[0].TaskID, 0, 1000)
	if err != nil || len(got) != len(lines) || got[449].Seq != 450 || string(got[7].Data) != string(lines[7].Data) {
		t.Errorf("copied lines: %d (%v), want the 450 lines once each", len(got), err)
	}
	if h, err := dst.Head(ctx, runs[0].TaskID); err != nil || !h.Whole || h.Title != "t" {
		t.Errorf("copied head: %+v %v", h, err)
	}

	// What is wrong is named, and a password never printed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", filepath.Join(data, "nothing-here"), "--to", url}, "--from: no receipts database at"},
		{[]string{"--from", data, "--to", "mysql://u:hunter2@db/x"}, "--to: receipts: the database URL is not postgres://"},
		{[]string{"--from", data, "--to", "postgres://u:hunter2@127.0.0.1:1/x?connect_timeout=5"}, "--to: receipts: connect to PostgreSQL 127.0.0.1:1/x"},
		{[]string{"--from", data}, "--to: required"},
	} {
		cmd := exec.Command(bin, append([]string{"receipts", "copy"}, c.args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "hunter2") {
			t.Errorf("receipts copy %v: %v\n%s\nwant a failure saying %q, without the password", c.args, err, out, c.want)
		}
	}
}
