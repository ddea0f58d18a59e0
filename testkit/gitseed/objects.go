package gitseed

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeRoot writes c, a root commit on a branch that does not exist yet,
// as loose objects and a loose ref, without starting a process: most
// seeds are such first commits, and on these machines a `git fast-import`
// costs more CPU than everything else a seeded test does. ok is false
// where the repository is not the plain SHA-1 layout this writes (then
// Write leaves it to fast-import, which also says what is wrong).
func writeRoot(gitDir string, c Commit) (sha string, ok bool, err error) {
	if c.Parent != "" || (c.Mode != "100644" && c.Mode != "100755") || !plainRepository(gitDir, c.Branch) {
		return "", false, nil
	}
	w := objectWriter{dir: filepath.Join(gitDir, "objects")}
	files := map[string]string{}
	for name, content := range c.Files {
		if content != "" { // an empty content deletes, and a root has nothing to delete
			files[name] = content
		}
	}
	tree, err := w.tree(files, c.Mode)
	if err != nil {
		return "", true, err
	}
	who := fmt.Sprintf("%s %d +0000", c.Committer, time.Now().Unix())
	commit := fmt.Sprintf("tree %s\nauthor %s\ncommitter %s\n\n%s\n", tree, who, who, c.Message)
	if sha, err = w.write("commit", []byte(commit)); err != nil {
		return "", true, err
	}
	ref := filepath.Join(gitDir, "refs", "heads", filepath.FromSlash(c.Branch))
	if err := writeFileAtomic(ref, []byte(sha+"\n"), 0o644); err != nil {
		return "", true, err
	}
	return sha, true, nil
}

// plainRepository reports whether gitDir is a SHA-1 repository with loose
// refs in which branch does not exist yet.
func plainRepository(gitDir, branch string) bool {
	conf, err := os.ReadFile(filepath.Join(gitDir, "config"))
	if err != nil || strings.Contains(strings.ToLower(string(conf)), "objectformat") || strings.Contains(strings.ToLower(string(conf)), "refstorage") {
		return false
	}
	if fi, err := os.Stat(filepath.Join(gitDir, "objects")); err != nil || !fi.IsDir() {
		return false
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "refs", "heads", filepath.FromSlash(branch))); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	packed, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	return errors.Is(err, fs.ErrNotExist) || (err == nil && !bytes.Contains(packed, []byte(" refs/heads/"+branch+"\n")))
}

// objectWriter writes loose objects as git does: zlib-compressed
// "<type> <size>\0<content>", named by the SHA-1 of the uncompressed form.
type objectWriter struct{ dir string }

func (w objectWriter) write(kind string, content []byte) (string, error) {
	raw := append(fmt.Appendf(nil, "%s %d\x00", kind, len(content)), content...)
	sum := sha1.Sum(raw)
	sha := hex.EncodeToString(sum[:])
	path := filepath.Join(w.dir, sha[:2], sha[2:])
	if _, err := os.Stat(path); err == nil {
		return sha, nil
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		return "", err
	}
	return sha, writeFileAtomic(path, z.Bytes(), 0o444)
}

// tree writes the tree of files (slash-separated paths) and its subtrees,
// and returns its sha. Git orders a tree's entries by name, a
// subdirectory's name compared as if it ended in "/".
func (w objectWriter) tree(files map[string]string, mode string) (string, error) {
	type entry struct{ mode, name, sha string }
	var entries []entry
	subdirs := map[string]map[string]string{}
	for name, content := range files {
		if dir, rest, ok := strings.Cut(name, "/"); ok {
			if subdirs[dir] == nil {
				subdirs[dir] = map[string]string{}
			}
			subdirs[dir][rest] = content
			continue
		}
		sha, err := w.write("blob", []byte(content))
		if err != nil {
			return "", err
		}
		entries = append(entries, entry{mode, name, sha})
	}
	for _, dir := range slices.Sorted(maps.Keys(subdirs)) {
		sha, err := w.tree(subdirs[dir], mode)
		if err != nil {
			return "", err
		}
		entries = append(entries, entry{"40000", dir, sha})
	}
	key := func(e entry) string {
		if e.mode == "40000" {
			return e.name + "/"
		}
		return e.name
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(key(a), key(b)) })
	var b bytes.Buffer
	for _, e := range entries {
		bin, _ := hex.DecodeString(e.sha)
		fmt.Fprintf(&b, "%s %s\x00", e.mode, e.name)
		b.Write(bin)
	}
	return w.write("tree", b.Bytes())
}

// writeFileAtomic writes path through a temporary file renamed into
// place with mode (git's: objects read-only), creating its directory, so a reader never sees half an object
// or ref.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// ReadLoose is path's content in commit, read from the repository's loose
// objects (what writeRoot writes) without a process. found is false when
// the commit's tree has no such path; ok is false when something on the
// way is not a loose object, a blob or a tree git would show as a file
// (packed, a directory, a submodule), and the caller asks git.
func ReadLoose(gitDir, commit, path string) (content []byte, found, ok bool) {
	kind, body, ok := readLoose(gitDir, commit)
	if !ok || kind != "commit" {
		return nil, false, false
	}
	sha, isTree := "", true
	if t, _, cut := strings.Cut(string(body), "\n"); cut && strings.HasPrefix(t, "tree ") {
		sha = strings.TrimPrefix(t, "tree ")
	}
	if len(sha) != 40 {
		return nil, false, false
	}
	for _, name := range strings.Split(path, "/") {
		if !isTree {
			return nil, false, true // a file has no entries
		}
		kind, body, ok := readLoose(gitDir, sha)
		if !ok || kind != "tree" {
			return nil, false, false
		}
		mode, next, present := treeEntry(body, name)
		if !present {
			return nil, false, true
		}
		if mode == "160000" {
			return nil, false, false
		}
		sha, isTree = next, mode == "40000"
	}
	if isTree {
		return nil, false, false
	}
	kind, body, ok = readLoose(gitDir, sha)
	if !ok || kind != "blob" {
		return nil, false, false
	}
	return body, true, true
}

// readLoose reads one loose object: its type and content.
func readLoose(gitDir, sha string) (kind string, body []byte, ok bool) {
	if len(sha) != 40 {
		return "", nil, false
	}
	f, err := os.Open(filepath.Join(gitDir, "objects", sha[:2], sha[2:]))
	if err != nil {
		return "", nil, false
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return "", nil, false
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return "", nil, false
	}
	header, rest, cut := bytes.Cut(raw, []byte{0})
	kind, size, _ := strings.Cut(string(header), " ")
	if !cut || size != strconv.Itoa(len(rest)) {
		return "", nil, false
	}
	return kind, rest, true
}

// treeEntry finds name in a tree object's entries ("<mode> <name>\0" and
// 20 bytes of sha each).
func treeEntry(tree []byte, name string) (mode, sha string, ok bool) {
	for len(tree) > 0 {
		head, rest, cut := bytes.Cut(tree, []byte{0})
		if !cut || len(rest) < 20 {
			return "", "", false
		}
		m, n, _ := strings.Cut(string(head), " ")
		if n == name {
			return m, hex.EncodeToString(rest[:20]), true
		}
		tree = rest[20:]
	}
	return "", "", false
}
