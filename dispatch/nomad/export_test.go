package nomad

// Primed reports whether the run of jobID is watched and was read once by a
// query since, so a test can change the run knowing that the change reaches
// the watcher by the event stream and not by that first read.
func (b *Backend) Primed(jobID string) bool {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	r := b.w.runs[jobID]
	return r != nil && r.primed
}
