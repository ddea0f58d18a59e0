package nomadtest

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// fsList answers /v1/client/fs/ls/<alloc>?path=... as a Nomad client's
// AllocDir.List does: the entries of a directory, each described without
// following links (os.DirEntry.Info is an lstat), with FileMode as
// os.FileMode.String prints it ("Lrwxrwxrwx" for a link).
func (s *Server) fsList(w http.ResponseWriter, r *http.Request, id string) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "/"
	}
	full, ok := s.fsPath(w, r, id, p)
	if !ok {
		return
	}
	entries, err := os.ReadDir(full)
	if errors.Is(err, os.ErrNotExist) {
		fileNotFound(w, p)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := make([]*api.AllocFileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out = append(out, &api.AllocFileInfo{Name: fi.Name(), IsDir: fi.IsDir(), Size: fi.Size(), FileMode: fi.Mode().String(), ModTime: fi.ModTime()})
	}
	s.writeJSON(w, http.StatusOK, s.Index(), out)
}

// fsPath resolves p in allocation id's directory for the fs endpoints,
// answering the request itself when it cannot.
func (s *Server) fsPath(w http.ResponseWriter, r *http.Request, id, p string) (string, bool) {
	a := s.allocForClient(w, r, id, "read-fs")
	if a == nil {
		return "", false
	}
	full, err := allocDirPath(a.dir, p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return "", false
	}
	// A task's secrets/ and private/ are no business of the fs API, as a
	// client's AllocDir.ReadAt refuses them (the prefix matched in any
	// case).
	if parts := strings.Split(strings.Trim(filepath.Clean("/"+p), "/"), "/"); len(parts) >= 2 && parts[0] != "alloc" {
		for _, dir := range []string{"secrets", "private"} {
			if strings.EqualFold(parts[1], dir) {
				http.Error(w, "Reading "+strings.TrimSuffix(dir, "s")+" file prohibited: "+p, http.StatusInternalServerError)
				return "", false
			}
		}
	}
	return full, true
}
