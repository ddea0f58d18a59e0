package testenv

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// sourceStamp describes what a `go build` of the module reads from the
// checkout: every file under root but .git and node_modules, by path,
// size and modification time, with the toolchain and the environment
// variables that change a build. The module cache is read-only and named
// by go.sum, which is one of the files.
//
// It spares each test binary of a `go test ./...` its own `go build` of a
// command another one just built: go finds the executable current too, but
// only after hashing every package it imports (0.5-1 s of CPU each time,
// seven times in the fast tier), where this is one walk of under a
// thousand files (a few milliseconds). A file changed while a build runs
// leaves the stamp taken before it, so the next test builds again.
func sourceStamp(root string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", runtime.Version())
	for _, k := range []string{"GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOTOOLCHAIN"} {
		fmt.Fprintf(h, "%s=%s\x00", k, os.Getenv(k))
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%v\x00", p, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
