package media_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/runner/media"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The test binary doubles as the project's dev server: with
// MEDIA_TEST_SERVE set it serves two pages on $PORT.
func TestMain(m *testing.M) {
	if os.Getenv("MEDIA_TEST_SERVE") == "1" {
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `<html><body style="background:#1e90ff;margin:0"><h1 style="color:white;font-size:80px">Home</h1></body></html>`)
		})
		mux.HandleFunc("/settings", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `<html><body style="background:#ff8c00;margin:0"><h1 style="font-size:80px">Settings</h1></body></html>`)
		})
		http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), mux)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestCaptureScreenshotsAndRecording(t *testing.T) {
	chromium := testenv.Chromium(t)
	ffmpeg := testenv.Binary(t, "ffmpeg", "apt-get install ffmpeg")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := media.Capture(ctx, media.Options{
		Chromium: chromium, FFmpeg: ffmpeg,
		Dir:     t.TempDir(),
		Env:     append(os.Environ(), "MEDIA_TEST_SERVE=1"),
		Command: strconv.Quote(self),
		Port:    freePort(t),
		Routes:  []string{"/", "/settings"},
		OutDir:  out,
		Dwell:   500 * time.Millisecond,
		Log:     zerolog.New(zerolog.NewTestWriter(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every route at the desktop width, then every route at the mobile one.
	want := []struct {
		name string
		w, h int
		bg   uint32
	}{{"index.png", 1280, 800, 0x1e90ff}, {"settings.png", 1280, 800, 0xff8c00}, {"index-mobile.png", 390, 844, 0x1e90ff}, {"settings-mobile.png", 390, 844, 0xff8c00}}
	if len(res.Screenshots) != len(want) {
		t.Fatalf("screenshots = %v", res.Screenshots)
	}
	for i, p := range res.Screenshots {
		if filepath.Base(p) != want[i].name {
			t.Fatalf("screenshot %d is %s, want %s", i, filepath.Base(p), want[i].name)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if b := img.Bounds(); b.Dx() != want[i].w || b.Dy() != want[i].h {
			t.Fatalf("%s is %v, want %dx%d", p, b, want[i].w, want[i].h)
		}
		// Each page's own background: the browser really rendered the route.
		r, g, b, _ := img.At(want[i].w-20, want[i].h-20).RGBA()
		if c := r>>8<<16 | g>>8<<8 | b>>8; c != want[i].bg {
			t.Fatalf("%s: background %06x, want %06x", p, c, want[i].bg)
		}
	}
	if len(res.Recordings) != 2 {
		t.Fatalf("recordings = %v", res.Recordings)
	}
	webm, _ := os.ReadFile(res.Recordings[0])
	webp, _ := os.ReadFile(res.Recordings[1])
	if !bytes.HasPrefix(webm, []byte{0x1a, 0x45, 0xdf, 0xa3}) {
		t.Fatal("recording.webm is not a WebM (EBML) file")
	}
	if len(webp) < 16 || string(webp[0:4]) != "RIFF" || string(webp[8:12]) != "WEBP" || !bytes.Contains(webp, []byte("ANIM")) {
		t.Fatal("recording.webp is not an animated WebP")
	}
}

func TestDevServerThatNeverAnswers(t *testing.T) {
	chromium := testenv.Chromium(t)
	_, err := media.Capture(context.Background(), media.Options{
		Chromium: chromium, Dir: t.TempDir(), Command: "exit 3", Port: freePort(t), Routes: []string{"/"}, OutDir: t.TempDir(),
	})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("exited before answering")) {
		t.Fatalf("err = %v", err)
	}
}

func TestRouteFile(t *testing.T) {
	for in, want := range map[string]string{"/": "index", "": "index", "/settings": "settings", "/a/b?x=1": "a-b-x-1"} {
		if got := media.RouteFile(in); got != want {
			t.Errorf("RouteFile(%q) = %q, want %q", in, got, want)
		}
	}
}
