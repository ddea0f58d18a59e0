package dispatch

// What GitHub says reaches the agent through the work order, beside the
// task's text: the report of someone without write access that a writer
// vouched for, the repository's failing checks (a CI fix run), and the
// images people attached. Each is the bot's reading of GitHub, bounded and
// cleaned before it is put here; the runner hands it to the agent as data.

// Report is an issue written by someone without write access, passed to
// the agent because a writer vouched for it (labeled the issue or
// mentioned the App on it): the reporter's title and body with hidden
// content removed, which the prompt quotes as their words.
type Report struct {
	// Author wrote the issue; VouchedBy is the writer who asked for the
	// run.
	Author    string `json:"author"`
	VouchedBy string `json:"vouched_by,omitempty"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	// Removed says what hidden content was taken out ("2 HTML comments").
	Removed []string `json:"removed,omitempty"`
}

// CIReport is what a CI fix run is asked to fix: the checks that failed on
// the pull request's head, as GitHub reported them.
type CIReport struct {
	// HeadSHA is the commit the checks failed on.
	HeadSHA string `json:"head_sha"`
	// Attempt is this fix run's number on the pull request, of Attempts.
	Attempt  int         `json:"attempt"`
	Attempts int         `json:"attempts"`
	Failures []CIFailure `json:"failures"`
	// AlsoOnBase are failing checks that fail on the base branch's head
	// too: not the change's doing, named so the agent leaves them alone.
	AlsoOnBase []string `json:"also_on_base,omitempty"`
}

// CIFailure is one failing check: a check run (an Actions job, another
// app's check) or a commit status.
type CIFailure struct {
	Name string `json:"name"`
	// Kind is "actions" (a GitHub Actions job), "check" (another app's
	// check run) or "status" (a commit status).
	Kind       string `json:"kind"`
	Conclusion string `json:"conclusion"`
	// Workflow and Step are an Actions job's workflow and failing step.
	Workflow string `json:"workflow,omitempty"`
	Step     string `json:"step,omitempty"`
	// Title and Summary are the check run's output (a status's
	// description is its Summary).
	Title       string         `json:"title,omitempty"`
	Summary     string         `json:"summary,omitempty"`
	Annotations []CIAnnotation `json:"annotations,omitempty"`
	// LogTail is the end of the failing step's log (Actions), cut to the
	// bot's bound; LogBytes is the size of the whole log.
	LogTail  string `json:"log_tail,omitempty"`
	LogBytes int64  `json:"log_bytes,omitempty"`
	// URL is where a person reads it on GitHub.
	URL string `json:"url,omitempty"`
}

// CIAnnotation is one annotation of a check run.
type CIAnnotation struct {
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	Level   string `json:"level,omitempty"`
	Title   string `json:"title,omitempty"`
	Message string `json:"message"`
}

// Image is a picture people attached to the issue or to feedback, which
// the bot fetched from GitHub and checked by its bytes (PNG, JPEG, GIF or
// WebP); the runner hands it to the agent as an image.
type Image struct {
	// Name says where it came from, for people and the agent ("issue
	// body, image 1 (screenshot.png)").
	Name string `json:"name"`
	// MediaType is image/png, image/jpeg, image/gif or image/webp, as the
	// bytes say.
	MediaType string `json:"media_type"`
	// Data is the image; JSON carries it as base64.
	Data []byte `json:"data"`
}

// ImageMediaTypes are the media types an Image may have.
var ImageMediaTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// ImagesReport is result.json's account of the images the work order
// carried: how many the agent was given, and why not, when it was not.
type ImagesReport struct {
	Given int    `json:"given"`
	Note  string `json:"note,omitempty"`
}

// ImageCarrier is a backend that carries fewer bytes of images in a run's
// work order than the bot's settings allow (Nomad: the work order travels
// inside the job, which Nomad keeps in its Raft log).
type ImageCarrier interface {
	MaxImageBytes() int64
}
