package agentsession_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
)

func TestArchiveRoundTrip(t *testing.T) {
	t.Parallel()
	m := agentsession.Manifest{TaskID: "T-01234567", Harness: "opencode", ID: "ses_x", Model: "p/m", Dir: "/sandbox/work/repo", BaseSHA: "abc"}
	b, err := agentsession.Encode(m, []byte(`{"info":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, data, err := agentsession.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	m.Version = agentsession.Version
	if got != m || string(data) != `{"info":{}}` {
		t.Fatalf("decoded %+v %q", got, data)
	}
}

// A session that does not compress under the cap is not saved.
func TestArchiveSizeCap(t *testing.T) {
	t.Parallel()
	noise := make([]byte, dispatch.MaxSessionArchiveBytes+1024)
	rand.Read(noise)
	_, err := agentsession.Encode(agentsession.Manifest{Harness: "h", ID: "i", Dir: "/d"}, noise)
	if !errors.Is(err, agentsession.ErrTooBig) {
		t.Fatalf("err = %v, want ErrTooBig", err)
	}
	if _, _, err := agentsession.Decode(make([]byte, dispatch.MaxSessionArchiveBytes+1)); !errors.Is(err, agentsession.ErrBad) {
		t.Fatalf("an archive over the cap: err = %v", err)
	}
	// Data that would inflate past its cap is refused from its header,
	// before anything is unpacked.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "session.data", Mode: 0o600, Size: agentsession.MaxDataBytes + 1, Typeflag: tar.TypeReg})
	tw.Write(bytes.Repeat([]byte("a"), 1<<20))
	tw.Flush()
	zw.Close()
	if _, _, err := agentsession.Decode(buf.Bytes()); !errors.Is(err, agentsession.ErrBad) || !strings.Contains(err.Error(), "cap") {
		t.Fatalf("a zip bomb: err = %v", err)
	}
}

type entry struct {
	name, body, link string
	typ              byte
}

const manifest = `{"version":1,"task_id":"T-01234567","harness":"opencode","id":"ses_x","dir":"/w"}`

func archive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: typ, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// Only the two files the runner writes are read: a path that leaves the
// archive, a link, a directory, a duplicate or a missing part is refused.
func TestArchiveRefusesWhatItDidNotWrite(t *testing.T) {
	t.Parallel()
	m := entry{name: "session.json", body: manifest}
	d := entry{name: "session.data", body: "{}"}
	if _, _, err := agentsession.Decode(archive(t, m, d)); err != nil {
		t.Fatalf("a good archive: %v", err)
	}
	cases := map[string][]byte{
		"path traversal":  archive(t, m, d, entry{name: "../../home/sandbox/.bashrc", body: "evil"}),
		"absolute path":   archive(t, m, entry{name: "/etc/passwd", body: "x"}),
		"traversal alias": archive(t, m, entry{name: "./../session.data", body: "{}"}),
		"symlink":         archive(t, m, entry{name: "session.data", typ: tar.TypeSymlink, link: "/run/sandbox-runner/secrets/token"}),
		"hard link":       archive(t, m, entry{name: "session.data", typ: tar.TypeLink, link: "session.json"}),
		"directory":       archive(t, m, d, entry{name: "session.d/", typ: tar.TypeDir}),
		"duplicate":       archive(t, m, d, d),
		"no data":         archive(t, m),
		"other version":   archive(t, entry{name: "session.json", body: strings.Replace(manifest, `"version":1`, `"version":9`, 1)}, d),
		"unknown field":   archive(t, entry{name: "session.json", body: strings.Replace(manifest, `"dir"`, `"evil":1,"dir"`, 1)}, d),
		"not gzip":        []byte("plain text"),
	}
	for name, b := range cases {
		if _, _, err := agentsession.Decode(b); !errors.Is(err, agentsession.ErrBad) {
			t.Errorf("%s: err = %v, want ErrBad", name, err)
		}
	}
}
