package dispatch_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// TestDialSocketBeneathFollowsNoLink: what a sandbox writes beneath the
// directory cannot turn the connection toward another socket.
func TestDialSocketBeneathFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	listen := func(path string) {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(filepath.Base(path)))
				c.Close()
			}
		}()
	}
	listen(filepath.Join(dir, "dev.sock"))
	listen(filepath.Join(elsewhere, "host.sock"))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(elsewhere, "host.sock"), filepath.Join(dir, "link.sock")))
	must(os.Symlink(elsewhere, filepath.Join(dir, "sub")))
	must(os.WriteFile(filepath.Join(dir, "file.sock"), nil, 0o600))
	// A socket whose listener is gone: the run that offered it ended.
	gone, err := net.Listen("unix", filepath.Join(dir, "gone.sock"))
	must(err)
	gone.(*net.UnixListener).SetUnlinkOnClose(false)
	gone.Close()

	ctx := context.Background()
	c, err := dispatch.DialSocketBeneath(ctx, dir, "dev.sock")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "dev.sock" {
		t.Fatalf("read %q through dev.sock", got)
	}
	for _, rel := range []string{"link.sock", "sub/host.sock", "../" + filepath.Base(elsewhere) + "/host.sock", "file.sock", "gone.sock", "missing.sock"} {
		if c, err := dispatch.DialSocketBeneath(ctx, dir, rel); !errors.Is(err, dispatch.ErrNoPreview) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: %v; want ErrNoPreview", rel, err)
		}
	}
	must(os.Symlink(dir, filepath.Join(elsewhere, "dirlink")))
	if _, err := dispatch.DialSocketBeneath(ctx, filepath.Join(elsewhere, "dirlink"), "dev.sock"); err == nil || errors.Is(err, dispatch.ErrNoPreview) {
		t.Errorf("a link as the directory: %v; want an error of its own", err)
	}
}
