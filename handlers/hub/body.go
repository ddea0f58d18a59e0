package hub

// BodyKind is which text on GitHub a body is.
type BodyKind string

// The texts images are read from.
const (
	BodyIssue         BodyKind = "issue"
	BodyComment       BodyKind = "comment"
	BodyReview        BodyKind = "review"
	BodyReviewComment BodyKind = "review_comment"
)

// BodyRef names one text on GitHub: an issue's (or pull request's) body,
// a conversation comment, a review's body or an inline review comment.
type BodyRef struct {
	Kind   BodyKind `json:"kind"`
	Number int      `json:"number,omitempty"`
	ID     int64    `json:"id,omitempty"`
}
