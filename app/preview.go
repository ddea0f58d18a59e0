package app

import "net/http"

// previewProxy is filled in by preview.go's next revision.
type previewProxy struct{ lp *livePages }

func newPreviewProxy(lp *livePages) *previewProxy { return &previewProxy{lp: lp} }

func (p *previewProxy) serve(w http.ResponseWriter, r *http.Request, v viewer) {
	http.NotFound(w, r)
}
