package sandboxcfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"
)

// Routine is one entry of routines: work the bot starts by itself, on a
// schedule or when the default branch's checks fail, by opening an issue
// whose plan waits for /approve like any other.
type Routine struct {
	Name     string `yaml:"name" json:"name" desc:"Name of the routine: lower-case letters, digits, - and _. The issues it opens carry the label routine:<name>; /run <name> starts it now." required:"true"`
	Schedule string `yaml:"schedule,omitempty" json:"schedule,omitempty" desc:"Five-field cron (minute hour day-of-month month day-of-week, e.g. 0 6 * * 1) or @hourly, @daily, @weekly, @monthly. Each tick runs once across replicas; a wall-clock time fires once, also across daylight-saving changes. Either schedule or on."`
	Timezone string `yaml:"timezone,omitempty" json:"timezone,omitempty" desc:"IANA time zone the schedule is read in, e.g. Europe/Berlin. Default UTC."`
	On       string `yaml:"on,omitempty" json:"on,omitempty" desc:"An event instead of a schedule: main_ci_failed opens an issue when the checks of the default branch's head have all completed and some failed, with their annotations and log tails; one per failure while its issue is open." enum:"main_ci_failed"`
	Task     string `yaml:"task" json:"task" desc:"What the agent is asked to do: the body of the issue the routine opens." required:"true"`
	Mode     string `yaml:"mode,omitempty" json:"mode,omitempty" desc:"issue (default): open an issue labeled with the trigger label and routine:<name>, by the App, whose plan follows for /approve." enum:"issue"`
	// Repositories narrows an organisation's routine; a repository's own
	// file may not set it.
	Repositories []string `yaml:"repositories,omitempty" json:"repositories,omitempty" desc:"Only in the organisation's .github/.sandbox.yml: the repositories (names without the owner) the routine runs in. Default: every repository without a routine of the same name."`
}

// Routines keeps the entries in file order; each is validated on its own,
// so one bad entry never stops the others.
type Routines []Routine

// Routine triggers and modes.
const (
	OnMainCIFailed = "main_ci_failed"
	RoutineIssue   = "issue"
	// MaxRoutineTask bounds a routine's task text (an issue body).
	MaxRoutineTask = 30_000
)

var (
	routinesType = reflect.TypeOf(Routines{})
	routineName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,49}$`)
	cronParser   = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// Cron parses a routine's schedule: five fields or a descriptor, no
// seconds and no CRON_TZ (the zone is the timezone key).
func Cron(spec string) (cron.Schedule, error) {
	if strings.Contains(spec, "TZ=") {
		return nil, errors.New("set the zone with timezone:, not in the schedule")
	}
	if strings.HasPrefix(strings.TrimSpace(spec), "@every") {
		return nil, errors.New("@every is not a schedule of wall-clock times; write five fields")
	}
	return cronParser.Parse(spec)
}

// Location is the routine's time zone (UTC when unset).
func (r Routine) Location() (*time.Location, error) {
	if r.Timezone == "" {
		return time.UTC, nil
	}
	if strings.EqualFold(r.Timezone, "local") {
		return nil, errors.New(`"Local" is the bot's own zone; name an IANA zone such as Europe/Berlin`)
	}
	return time.LoadLocation(r.Timezone)
}

// decodeRoutines decodes each entry with a decoder of its own and
// validates it; a bad entry's problems go to d.routineErrs, never to
// d.errs, so the rest of the file (and the other routines) stay usable.
func (d *decoder) decodeRoutines(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.routineErrs = append(d.routineErrs, &FieldError{File: d.file, Pos: Pos{n.Line, n.Column}, Field: path, Msg: "expected a list of routines, got " + describe(n)})
		return
	}
	var out Routines
	seen := map[string]bool{}
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		sub := &decoder{file: d.file, pos: positions{}}
		var r Routine
		sub.decode(item, reflect.ValueOf(&r).Elem(), p)
		if sub.work > 0 && !d.spend(item, p, sub.work) {
			return
		}
		errs := sub.errs
		if len(errs) == 0 {
			errs = r.validate(d.file, p, sub.pos, seen)
		}
		if len(errs) > 0 {
			d.routineErrs = append(d.routineErrs, errs...)
			continue
		}
		seen[r.Name] = true
		out = append(out, r)
	}
	v.Set(reflect.ValueOf(out))
}

// validate checks one entry; seen are the names of the valid entries
// before it.
func (r Routine) validate(file, path string, pos positions, seen map[string]bool) Errors {
	var errs Errors
	bad := func(field, format string, args ...any) {
		at := pos[join(path, field)]
		if at.Line == 0 {
			at = pos[path]
		}
		errs = append(errs, &FieldError{File: file, Pos: at, Field: join(path, field), Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case !routineName.MatchString(r.Name):
		bad("name", "routine names are lower-case letters, digits, - and _ (at most 50), got %q", r.Name)
	case seen[r.Name]:
		bad("name", "another routine is named %q", r.Name)
	}
	switch {
	case r.Schedule == "" && r.On == "":
		bad("schedule", "is required (or on: %s)", OnMainCIFailed)
	case r.Schedule != "" && r.On != "":
		bad("on", "a routine has a schedule or an on, not both")
	case r.On != "" && r.On != OnMainCIFailed:
		bad("on", "must be %s, got %q", OnMainCIFailed, r.On)
	case r.Schedule != "":
		if _, err := Cron(r.Schedule); err != nil {
			bad("schedule", "not a five-field cron line (minute hour day-of-month month day-of-week): %v", err)
		}
	}
	if r.Timezone != "" {
		if r.On != "" {
			bad("timezone", "only a schedule has a time zone")
		} else if _, err := r.Location(); err != nil {
			bad("timezone", "not an IANA time zone (e.g. Europe/Berlin): %v", err)
		}
	}
	if strings.TrimSpace(r.Task) == "" {
		bad("task", "is required: it is what the agent is asked to do")
	} else if len(r.Task) > MaxRoutineTask {
		bad("task", "is %d bytes; at most %d", len(r.Task), MaxRoutineTask)
	}
	if r.Mode != "" && r.Mode != RoutineIssue {
		bad("mode", "must be %s, got %q%s", RoutineIssue, r.Mode, suggest(r.Mode, []string{RoutineIssue}))
	}
	for i, name := range r.Repositories {
		if name == "" || strings.ContainsAny(name, "/ ") {
			bad(fmt.Sprintf("repositories[%d]", i), "a repository's name without its owner, got %q", name)
		}
	}
	return errs
}

// ParseRoutines reads the routines of a .sandbox.yml: the valid entries,
// and every problem of the others with its line and column. The rest of
// the file is not checked here (Parse does), so a mistake elsewhere does
// not stop the routines, and a bad routine does not stop the runs.
func ParseRoutines(file string, data []byte) (Routines, Errors) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		var errs Errors
		errors.As(syntaxError(file, data, err), &errs)
		return nil, errs
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	d := &decoder{file: file, pos: positions{}}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "routines" {
			var out Routines
			d.decodeRoutines(root.Content[i+1], reflect.ValueOf(&out).Elem(), "routines")
			return out, append(d.routineErrs, d.errs...)
		}
	}
	return nil, nil
}

// ForRepo is what of an organisation's routines (org) and a repository's
// (own) apply to the repository name: its own, then the organisation's it
// does not name itself and that list it (or list none).
func ForRepo(org, own Routines, name string) Routines {
	out := slices.Clone(own)
	for _, r := range org {
		if slices.ContainsFunc(own, func(o Routine) bool { return o.Name == r.Name }) {
			continue
		}
		if len(r.Repositories) > 0 && !slices.ContainsFunc(r.Repositories, func(n string) bool { return strings.EqualFold(n, name) }) {
			continue
		}
		out = append(out, r)
	}
	return out
}
