package secretscan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ScanCommits scans commit objects as `git cat-file --batch` prints them
// (each "<sha> commit <size>", the object, a newline): each commit's
// headers as stored (tree, parents, the author's and committer's names and
// emails, and any other header the object holds: gpgsig, mergetag,
// encoding, or one an agent wrote with git hash-object) and its whole
// message. A push publishes all of it, and a commit that changes nothing
// (an empty commit, a merge) shows in no patch. Each object is read as a
// stream, its first MaxBlobBytes of headers and of message scanned.
func (s *Scanner) ScanCommits(ctx context.Context, batch io.Reader) (*Result, error) {
	res := &Result{}
	frags := make(chan fragment, 8)
	found := s.scanAll(ctx, frags)
	err := readBatch(batch, func(sha string, obj io.Reader) error {
		res.Commits++
		res.SHAs = append(res.SHAs, sha)
		cut, err := s.splitCommit(sha, obj, func(f fragment) { frags <- f })
		if cut {
			res.Cut = append(res.Cut, "commit "+sha)
		}
		return err
	})
	close(frags)
	all := dedupe(found())
	if err != nil {
		return nil, fmt.Errorf("secret scan: read the commits: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.sort(res, all)
	return res, nil
}

// readBatch calls each for every commit of a `git cat-file --batch`
// stream, with a reader of exactly its object, which each must not keep.
func readBatch(batch io.Reader, each func(sha string, obj io.Reader) error) error {
	br := bufio.NewReader(batch)
	for {
		head, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) && head == "" {
			return nil
		}
		if err != nil {
			return err
		}
		f := strings.Fields(head)
		if len(f) != 3 || f[1] != "commit" {
			return fmt.Errorf("unexpected object header %q (want \"<sha> commit <size>\")", strings.TrimSpace(head))
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("object %s: bad size %q", f[0], f[2])
		}
		obj := io.LimitReader(br, size)
		if err := each(f[0], obj); err != nil {
			return err
		}
		// Whatever each left, and the newline after the object.
		if _, err := io.Copy(io.Discard, obj); err != nil {
			return err
		}
		if b, err := br.ReadByte(); err != nil || b != '\n' {
			return fmt.Errorf("object %s: no newline after its %d bytes", f[0], size)
		}
	}
}

// splitCommit sends a commit object's headers and message to the detector
// in chunks, and says whether either was cut at MaxBlobBytes.
func (s *Scanner) splitCommit(sha string, obj io.Reader, emit func(fragment)) (bool, error) {
	headers := newChunker(fragment{commit: sha, path: CommitHeaders}, emit)
	message := newChunker(fragment{commit: sha, path: CommitMessage}, emit)
	br := bufio.NewReaderSize(obj, 64<<10)
	w, lineStart := headers, true
	var err error
	for {
		var piece []byte
		piece, err = br.ReadSlice('\n')
		if len(piece) > 0 {
			// The first empty line ends the headers; it belongs to
			// neither part.
			if w == headers && lineStart && len(piece) == 1 && piece[0] == '\n' {
				w = message
			} else {
				_, _ = w.Write(piece)
			}
			lineStart = piece[len(piece)-1] == '\n'
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	_ = headers.Close()
	_ = message.Close()
	if !errors.Is(err, io.EOF) {
		return false, err
	}
	return headers.kept >= MaxBlobBytes || message.kept >= MaxBlobBytes, nil
}
