package handlers_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// testPNG is a w×h PNG whose pixels derive from seed (noise when noisy,
// which does not compress).
func testPNG(t testing.TB, w, h int, seed uint64, noisy bool) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(seed, seed))
	for y := range h {
		for x := range w {
			c := color.RGBA{uint8(seed), uint8(x), uint8(y), 255}
			if noisy {
				c = color.RGBA{uint8(r.Uint32()), uint8(r.Uint32()), uint8(r.Uint32()), 255}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The pictures of an issue reach its plan run's work order as GitHub
// rendered them: the issue's attachment and a writer's <img>, fetched from
// the signed URLs of body_html. Not fetched: an outsider's attachment, an
// image inside an HTML comment (GitHub does not render it), an image from
// outside GitHub (its proxy), a file whose bytes are no image, one over the
// size cap. The plan comment names each, shown or not and why.
func TestIssueImagesReachThePlanRun(t *testing.T) {
	t.Parallel()
	h := imagesHarness(t, map[string]string{"SANDBOX_IMAGES_MAX_SIZE": "64KiB"})
	shot, detail := testPNG(t, 40, 30, 1, false), testPNG(t, 20, 20, 2, false)
	shotURL := h.gh.AddAttachment("login.png", shot)
	detailURL := h.gh.AddAttachment("detail.png", detail)
	outsiderURL := h.gh.AddAttachment("mallory.png", testPNG(t, 10, 10, 3, false))
	hiddenURL := h.gh.AddAttachment("hidden.png", testPNG(t, 10, 10, 4, false))
	fakeURL := h.gh.AddAttachment("logs.png", []byte("not a picture at all, just text\n"))
	bigURL := h.gh.AddAttachment("big.png", testPNG(t, 200, 200, 5, true))
	n := h.gh.AddIssue(testRepo, writer, "The login page is broken", "It looks like this:\n\n![login page]("+shotURL+")\n\n"+
		"<!-- ![hidden]("+hiddenURL+") -->\n![logo](https://example.com/logo.png)\n\n![logs]("+fakeURL+")\n\n![huge]("+bigURL+")")
	h.gh.AddComment(testRepo, n, reader, "Look: ![mine]("+outsiderURL+")")
	h.gh.AddComment(testRepo, n, writer, `Closer: <img width="200" alt="detail" src="`+detailURL+`">`)
	h.label(n, writer, "d-images")
	spec := h.waitSubmitted(1)[0]
	imgs := spec.Order.Images
	if len(imgs) != 2 || !bytes.Equal(imgs[0].Data, shot) || !bytes.Equal(imgs[1].Data, detail) || imgs[0].MediaType != "image/png" {
		t.Fatalf("the work order's images: %d %v", len(imgs), names(imgs))
	}
	for _, u := range []string{outsiderURL, hiddenURL} {
		if n := h.gh.AttachmentFetches(u); n != 0 {
			t.Errorf("%s was fetched %d times", u, n)
		}
	}
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Fix the button.",
		Images: &dispatch.ImagesReport{Given: 2}})
	c := h.waitComment(n, "plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	for _, want := range []string{
		"🖼️ the issue, image 1 (login page)", "🖼️ a comment by alice, image 1 (detail)",
		"❌ the issue, image 2 (logo): not shown, GitHub answered 404",
		"❌ the issue, image 3 (logs): not shown, its bytes are not a PNG, JPEG, GIF or WebP image",
		"❌ the issue, image 4 (huge): not shown, larger than 64 KiB",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("the plan comment lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "jwt=") || strings.Contains(c, "mallory") || strings.Contains(c, "hidden") {
		t.Errorf("the plan comment names what it must not:\n%s", c)
	}
}

// imagesHarness is the bot on a fake GitHub that is its GITHUB_WEB_URL:
// the fake's host is GitHub's, where images may be fetched from.
func imagesHarness(t *testing.T, env map[string]string) *harness {
	gh := githubtest.New(t, githubtest.Options{})
	vars := map[string]string{"GITHUB_WEB_URL": gh.WebURL()}
	for k, v := range env {
		vars[k] = v
	}
	return newHarnessOn(t, gh, nil, vars)
}

func names(imgs []dispatch.Image) []string {
	var out []string
	for _, i := range imgs {
		out = append(out, i.Name)
	}
	return out
}

// A reviewer's inline comment with a screenshot starts a revise run that
// is given the screenshot (before the issue's own pictures).
func TestReviewImagesReachTheReviseRun(t *testing.T) {
	t.Parallel()
	h := imagesHarness(t, nil)
	issueShot := testPNG(t, 8, 8, 6, false)
	n := h.gh.AddIssue(testRepo, writer, "Fix", "Before: ![before]("+h.gh.AddAttachment("before.png", issueShot)+")")
	pr := h.agentPR(n)
	review := testPNG(t, 12, 12, 7, false)
	h.inlineComment(pr, writer, "greet.go", 3, "This renders wrong: ![now]("+h.gh.AddAttachment("now.png", review)+")", time.Now())
	spec := h.waitSubmitted(1)[0]
	imgs := spec.Order.Images
	if spec.Order.Mode != dispatch.ModeRevise || len(imgs) != 2 || !bytes.Equal(imgs[0].Data, review) || !bytes.Equal(imgs[1].Data, issueShot) {
		t.Fatalf("the revise run's images: %s %v", spec.Order.Mode, names(imgs))
	}
	if !strings.HasPrefix(imgs[0].Name, "an inline comment by alice") {
		t.Errorf("image names %v", names(imgs))
	}
}

// A body of 500 <img> tags to attachments that are not pictures costs at
// most twice images.max_count fetches, whose refused bytes count toward
// the run's total; the run starts, and its acknowledgement and plan
// comment name the first 20 images not given and count the rest, within
// GitHub's 65,536 characters.
func TestAFloodOfNonImagesIsBounded(t *testing.T) {
	t.Parallel()
	h := imagesHarness(t, map[string]string{"SANDBOX_IMAGES_MAX_COUNT": "3"})
	var body strings.Builder
	var urls []string
	for i := range 500 {
		u := h.gh.AddAttachment(fmt.Sprintf("shot-%d.png", i), bytes.Repeat([]byte("not a picture\n"), 1000))
		urls = append(urls, u)
		fmt.Fprintf(&body, `<img alt="screenshot number %d with a long description of what it shows" src="%s">`+"\n", i, u)
	}
	n := h.gh.AddIssue(testRepo, writer, "Everything is broken", body.String())
	h.label(n, writer, "d-flood")
	spec := h.waitSubmitted(1)[0]
	fetches := 0
	for _, u := range urls {
		fetches += h.gh.AttachmentFetches(u)
	}
	if fetches == 0 || fetches > 6 || len(spec.Order.Images) != 0 {
		t.Errorf("%d fetches (want 1 to 6: twice max_count 3), %d images given", fetches, len(spec.Order.Images))
	}
	h.backend.Finish(spec.Order.TaskID, &dispatch.Result{Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Fix it."})
	plan := h.waitComment(n, "the plan", func(c string) bool { return strings.Contains(c, "## 📋 Plan") })
	for _, c := range h.botComments(n) {
		if len(c) > 65536 {
			t.Errorf("a comment of %d characters, over GitHub's 65,536", len(c))
		}
	}
	if !strings.Contains(plan, "480 more images") || strings.Count(plan, "❌") != 21 || !strings.Contains(plan, "a run tries at most 6 images") {
		t.Errorf("the plan comment's images:\n%s", plan)
	}
}
