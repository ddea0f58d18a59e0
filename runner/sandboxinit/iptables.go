package sandboxinit

// The init's firewall rules go in as one iptables-restore batch per address
// family instead of one iptables process per rule: a start used to spawn
// some thirty of them, each a noticeable cost on a loaded host. A batch is
// also atomic: a sandbox never runs with half a fence.

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// ipTables runs an iptables-family tool (iptables-save, iptables-restore,
// or the ip6tables ones) with stdin as its input.
type ipTables func(ctx context.Context, bin, stdin string, args ...string) ([]byte, error)

func execIPTables(ctx context.Context, bin, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd.CombinedOutput()
}

// family is one address family's tools.
type family struct {
	save, restore string
	v6            bool
}

var (
	familyV4 = family{save: "iptables-save", restore: "iptables-restore"}
	familyV6 = family{save: "ip6tables-save", restore: "ip6tables-restore", v6: true}
)

// ruleBatch is iptables-restore input for one table (filter, unless
// said), built against what the table holds now so that a second start in
// the same network namespace (a Nomad task restart) neither fails nor
// doubles a jump.
type ruleBatch struct {
	fam      family
	table    string
	existing map[string]bool // rule lines and ":CHAIN" declarations now in the table
	lines    []string
}

// newBatch reads the filter table of fam (one iptables-save).
func newBatch(ctx context.Context, run ipTables, fam family) (*ruleBatch, error) {
	return newTableBatch(ctx, run, fam, "filter")
}

// newTableBatch reads table of fam (one iptables-save).
func newTableBatch(ctx context.Context, run ipTables, fam family, table string) (*ruleBatch, error) {
	out, err := run(ctx, fam.save, "", "-t", table)
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %v: %s", fam.save, table, err, strings.TrimSpace(string(out)))
	}
	b := &ruleBatch{fam: fam, table: table, existing: map[string]bool{}}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, ":") {
			name, _, _ := strings.Cut(l, " ")
			b.existing[name] = true
		} else if strings.HasPrefix(l, "-A ") {
			b.existing[l] = true
		}
	}
	return b, nil
}

// chain creates chain, or empties it when a previous start left it.
func (b *ruleBatch) chain(name string) {
	b.lines = append(b.lines, ":"+name+" - [0:0]")
	b.existing[":"+name] = true
}

// ensureChain creates chain unless it exists, keeping its rules (the
// inner daemon's DOCKER-USER, which it fills itself and never empties).
func (b *ruleBatch) ensureChain(name string) {
	if !b.existing[":"+name] {
		b.chain(name)
	}
}

// rule appends one rule ("-A CHAIN ...").
func (b *ruleBatch) rule(args ...string) { b.lines = append(b.lines, strings.Join(args, " ")) }

// jump inserts rule (chain first) at the top of its chain unless it is
// there already.
func (b *ruleBatch) jump(rule []string) {
	line := "-A " + strings.Join(rule, " ")
	if b.existing[line] {
		return
	}
	b.existing[line] = true
	b.lines = append(b.lines, strings.Join(append([]string{"-I", rule[0], "1"}, rule[1:]...), " "))
}

func (b *ruleBatch) text() string {
	return "*" + b.table + "\n" + strings.Join(b.lines, "\n") + "\nCOMMIT\n"
}

// restoreLine finds the failing line in iptables-restore's complaint
// ("Error occurred at line: 5", or "line 5 failed" from older versions).
var restoreLine = regexp.MustCompile(`(?:at line: |line )(\d+)`)

// commit applies the batch in one iptables-restore --noflush. A failure
// names the rule that failed.
func (b *ruleBatch) commit(ctx context.Context, run ipTables) error {
	if len(b.lines) == 0 {
		return nil
	}
	// -w: with the legacy backend the inner dockerd holds the same lock.
	out, err := run(ctx, b.fam.restore, b.text(), "--noflush", "-w", "5")
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	if m := restoreLine.FindStringSubmatch(msg); m != nil {
		// Line 1 is "*filter" (or the batch's table).
		if n, _ := strconv.Atoi(m[1]); n >= 2 && n-2 < len(b.lines) {
			return fmt.Errorf("%s: rule %q: %v: %s", b.fam.restore, b.lines[n-2], err, msg)
		}
	}
	return fmt.Errorf("%s: %v: %s", b.fam.restore, err, msg)
}
