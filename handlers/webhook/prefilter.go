package webhook

import (
	"strings"

	"github.com/valyala/fastjson"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// MayAct reports whether the handler of eventType could act on the event
// whose parsed payload is v. The webhook intake asks it before queueing a
// delivery, so the events a busy organisation sends by the thousand and the
// bot never acts on (conversation, other labels, tags, other apps' checks,
// bots' own events) cost neither a worker nor a full decode, and leave the
// CPU to the deliveries still being answered.
//
// It must never be narrower than the handlers: each rule below only repeats
// early returns its handler takes before it calls anything. A handler that starts acting on
// more must widen its rule here; TestPreFilterDropsOnlyWhatHandlersIgnore
// runs every recorded example the filter drops through the handler itself
// and fails if any of them calls GitHub or the backend. Event types without
// a rule (installations) always pass.
func (a *Adapters) MayAct(eventType string, v *fastjson.Value) bool {
	action := string(v.GetStringBytes("action"))
	switch eventType {
	case "issues":
		return action == "labeled" && string(v.GetStringBytes("label", "name")) == a.e.TriggerLabel()
	case "issue_comment":
		return action == "created" && !a.e.IgnoredSender(sender(v)) && a.e.MayAddress(v.GetStringBytes("comment", "body"))
	case "pull_request":
		if action == "closed" {
			// The App's own PR merged or closed: its attempts' branches go.
			return strings.HasPrefix(string(v.GetStringBytes("pull_request", "head", "ref")), dispatch.BranchPrefix)
		}
		// review.auto: a person's pull request opened or made ready.
		return autoReviewAction(action) && !v.GetBool("pull_request", "draft") &&
			!strings.HasPrefix(string(v.GetStringBytes("pull_request", "head", "ref")), dispatch.BranchPrefix)
	case "pull_request_review":
		return action == "submitted" && !a.e.IgnoredSender(sender(v)) &&
			strings.HasPrefix(string(v.GetStringBytes("pull_request", "head", "ref")), dispatch.BranchPrefix)
	case "pull_request_review_comment":
		// Inline comments matter on agent PRs (revise feedback); elsewhere
		// only a command in one does.
		return action == "created" && !a.e.IgnoredSender(sender(v)) &&
			(strings.HasPrefix(string(v.GetStringBytes("pull_request", "head", "ref")), dispatch.BranchPrefix) || a.e.MayAddress(v.GetStringBytes("comment", "body")))
	case "check_run":
		return action == "rerequested" && string(v.GetStringBytes("check_run", "name")) == a.e.CheckName() && !a.e.IgnoredSender(sender(v))
	case "check_suite":
		// The default branch's suites reach its on: main_ci_failed
		// routines, which look them up in memory first.
		branch := string(v.GetStringBytes("check_suite", "head_branch"))
		return action == "completed" && (strings.HasPrefix(branch, dispatch.BranchPrefix) || branch != "" && branch == string(v.GetStringBytes("repository", "default_branch"))) &&
			!a.e.OwnApp(string(v.GetStringBytes("check_suite", "app", "slug")))
	case "status":
		if string(v.GetStringBytes("state")) == "pending" {
			return false
		}
		def := string(v.GetStringBytes("repository", "default_branch"))
		for _, br := range v.GetArray("branches") {
			if name := string(br.GetStringBytes("name")); strings.HasPrefix(name, dispatch.BranchPrefix) || def != "" && name == def {
				return true
			}
		}
		return false
	case "push":
		branch, isBranch := strings.CutPrefix(string(v.GetStringBytes("ref")), "refs/heads/")
		return isBranch && !v.GetBool("deleted") && !strings.HasPrefix(branch, dispatch.BranchPrefix)
	}
	return true
}
