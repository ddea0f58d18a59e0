package sandboxinit

import (
	"testing"
)

func TestIsMountPoint(t *testing.T) {
	t.Parallel()
	if ok, err := isMountPoint("/"); err != nil || !ok {
		t.Fatalf("isMountPoint(/) = %v, %v; want true", ok, err)
	}
	if ok, err := isMountPoint(t.TempDir()); err != nil || ok {
		t.Fatalf("isMountPoint(a fresh temp dir) = %v, %v; want false", ok, err)
	}
}
