package gitserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// AllowedRefPrefix is the only place a push may write: the agent's own
// branches. Whatever the sandbox does, the user's other branches and tags,
// the checked-out one included, stay as they are.
const AllowedRefPrefix = "refs/heads/agent/"

// pushCommand is one "<old> <new> <ref>" line of a push request.
type pushCommand struct {
	old, new, ref string
}

// refusal says why a command may not run, or "".
func (c pushCommand) refusal() string {
	switch {
	case strings.Trim(c.new, "0") == "":
		return "deleting refs is not allowed"
	case !strings.HasPrefix(c.ref, AllowedRefPrefix) || len(c.ref) == len(AllowedRefPrefix):
		return "only " + AllowedRefPrefix + "* may be pushed"
	}
	return ""
}

// screenPush reads the commands of a receive-pack request and lets it on
// only when every one updates a branch under AllowedRefPrefix. Otherwise
// it answers the whole push with a rejection in git's own report format,
// which the git client prints ("remote: ..." and "! [remote rejected]").
// The commands are put back in front of the body, so git http-backend
// receives the request unchanged.
func (s *Server) screenPush(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Content-Encoding") != "" {
		// git never compresses a push; a compressed one cannot be screened.
		http.Error(w, "gitserve: compressed push requests are not accepted", http.StatusUnsupportedMediaType)
		return false
	}
	var head bytes.Buffer
	br := bufio.NewReader(io.TeeReader(r.Body, &head))
	cmds, caps, err := readCommands(br)
	if err != nil {
		http.Error(w, "gitserve: "+err.Error(), http.StatusBadRequest)
		return false
	}
	var reasons []string
	for _, c := range cmds {
		if why := c.refusal(); why != "" {
			reasons = append(reasons, fmt.Sprintf("refusing to update %s: %s", c.ref, why))
		}
	}
	if len(reasons) == 0 {
		// What the bufio reader read ahead is in head too.
		r.Body = io.NopCloser(io.MultiReader(&head, r.Body))
		return true
	}
	s.mu.Lock()
	s.refused++
	s.mu.Unlock()
	// Let the client finish sending its pack before it reads the answer.
	_, _ = io.Copy(io.Discard, r.Body)
	writeRejection(w, cmds, caps, reasons)
	return false
}

// readCommands parses the command list of a push request (pkt-lines up to
// a flush); the first line carries the client's capabilities after a NUL.
func readCommands(br *bufio.Reader) ([]pushCommand, map[string]bool, error) {
	var cmds []pushCommand
	caps := map[string]bool{}
	for {
		line, flush, err := readPkt(br)
		if err != nil {
			return nil, nil, fmt.Errorf("read push commands: %w", err)
		}
		if flush {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		if len(cmds) == 0 {
			var capList string
			line, capList, _ = strings.Cut(line, "\x00")
			for _, c := range strings.Fields(capList) {
				caps[c] = true
			}
		}
		if strings.HasPrefix(line, "shallow ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("push command %q is not \"<old> <new> <ref>\" (signed pushes are not supported)", line)
		}
		cmds = append(cmds, pushCommand{old: f[0], new: f[1], ref: f[2]})
	}
	if len(cmds) == 0 {
		return nil, nil, errors.New("push request without commands")
	}
	return cmds, caps, nil
}

// readPkt reads one pkt-line: four hex digits of length (themselves
// included) and the payload; "0000" is a flush.
func readPkt(br *bufio.Reader) (string, bool, error) {
	var n [4]byte
	if _, err := io.ReadFull(br, n[:]); err != nil {
		return "", false, err
	}
	size, err := strconv.ParseUint(string(n[:]), 16, 16)
	if err != nil {
		return "", false, fmt.Errorf("bad pkt-line length %q", n[:])
	}
	if size == 0 {
		return "", true, nil
	}
	if size < 4 {
		return "", false, fmt.Errorf("bad pkt-line length %d", size)
	}
	buf := make([]byte, size-4)
	if _, err := io.ReadFull(br, buf); err != nil {
		return "", false, err
	}
	return string(buf), false, nil
}

func pkt(s string) []byte { return []byte(fmt.Sprintf("%04x%s", len(s)+4, s)) }

// writeRejection answers a push with every ref refused: the reasons on the
// side band the client prints as "remote: ...", and a report that marks
// each ref "ng". Clients that asked for no side band get the report alone.
func writeRejection(w http.ResponseWriter, cmds []pushCommand, caps map[string]bool, reasons []string) {
	var report bytes.Buffer
	report.Write(pkt("unpack ok\n"))
	for _, c := range cmds {
		why := c.refusal()
		if why == "" {
			why = "the push is refused as a whole"
		}
		report.Write(pkt("ng " + c.ref + " " + why + "\n"))
	}
	report.WriteString("0000")

	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if !caps["side-band-64k"] && !caps["side-band"] {
		_, _ = w.Write(report.Bytes())
		return
	}
	band := func(n byte, b []byte) {
		for len(b) > 0 {
			chunk := b[:min(len(b), 990)] // fits the old side-band's 1000 bytes too
			b = b[len(chunk):]
			_, _ = w.Write(pkt(string(append([]byte{n}, chunk...))))
		}
	}
	msg := "gitserve: " + strings.Join(reasons, "\ngitserve: ") +
		"\ngitserve: this server takes only new commits on " + AllowedRefPrefix + "* branches\n"
	band(2, []byte(msg))
	band(1, report.Bytes())
	_, _ = w.Write([]byte("0000"))
}
