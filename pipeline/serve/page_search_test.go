package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// browserPage is one headless Chromium tab for a page test: it fails the
// test on the first step that fails, and keeps what the page reports
// (watchScript) and what the browser logs as an error outside the network.
type browserPage struct {
	t      *testing.T
	ctx    context.Context
	mu     sync.Mutex
	logged []string
}

// newBrowserPage starts Chromium (bin) for t; it stops with the test.
func newBrowserPage(t *testing.T, bin string) *browserPage {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	b := &browserPage{t: t}
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.logged = append(b.logged, "exception: "+ev.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			// Network errors are expected (a 401 before the token, a
			// 400 asked for); the others are not.
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				b.logged = append(b.logged, string(ev.Entry.Source)+": "+ev.Entry.Text)
			}
		}
	}))
	t.Cleanup(cancelBrowser)
	b.ctx = bctx
	return b
}

func (b *browserPage) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browserPage) eval(what, js string, out any) {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[json.RawMessage](js))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	if out != nil {
		if err := json.Unmarshal(v, out); err != nil {
			b.t.Fatalf("%s: %v: %s", what, err, v)
		}
	}
}

// poll waits for js to give a truthy value and returns it as a string.
func (b *browserPage) poll(what, js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Poll[json.RawMessage](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		s = string(v)
	}
	return s
}

// open loads url with watchScript in place and waits for the page's form.
func (b *browserPage) open(url string) {
	b.t.Helper()
	b.run("load the page",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchScript})
			return err
		}),
		chromedp.EmulateViewport(1200, 900),
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("attend")),
	)
}

// problems returns what the page and the browser reported as wrong.
func (b *browserPage) problems() []string {
	b.t.Helper()
	var out []string
	b.eval("the page's problems", `window.__problems`, &out)
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(out, b.logged...)
}

// searchHitInfo is what the test reads of one hit the page shows.
type searchHitInfo struct {
	Rank   int    `json:"rank"`
	Path   string `json:"path"`
	Loaded bool   `json:"loaded"` // the sheet image decoded: complete, naturalWidth > 0
	Width  int    `json:"width"`  // its naturalWidth
	Words  []struct {
		Word string `json:"word"`
		Cell string `json:"cell"` // "row,col"
		Box  string `json:"box"`  // "row0,col0,row1,col1"
		Text string `json:"text"`
	} `json:"words"`
}

// TestPageSearchInBrowser drives the page's search in headless Chromium.
// On a server with an index and a token the search is hidden until the
// token is typed (GET /v1/models answers 401 before), then shown with the
// number of images indexed; a typed query and top k, on Search, give top k
// hits in Index.Search's order, each with its rank and path, a sheet image
// that loads, and per content word the peak cell and box Index.Search
// gives. A query the server refuses shows the server's message in
// #search-status. On a server without an index the search stays hidden.
// The page logs no CSP violation or error. It saves a screenshot.
func TestPageSearchInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary (install Debian's chromium, or set CHROMIUM to one)")
	}
	const token = "search-test-token"
	const query, topK = "a yellow star", 4
	_, plain, eng := newTestServer(t, false, Options{})
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{filepath.Join("..", "..", "testdata", "scenes", "images")},
		Prompts: []string{"a red circle"}, Out: out, Index: true}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	_, ts, _ := newTestServer(t, false, Options{Index: x, Token: token})
	want, err := x.Search(context.Background(), eng, query, index.SearchOptions{Top: topK, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Hits) != topK {
		t.Fatalf("Index.Search: %d hits, want %d", len(want.Hits), topK)
	}

	b := newBrowserPage(t, bin)
	b.open(ts.URL + "/")
	if got := b.poll("the index check", `document.getElementById('search').dataset.index`); got != "locked" {
		t.Errorf("before the token the index check says %q, want locked", got)
	}
	var hidden bool
	b.eval("the search before the token", `document.getElementById('search').hidden`, &hidden)
	if !hidden {
		t.Error("the search is shown before the token is typed")
	}
	b.run("type the token", chromedp.SendKeys(chromedp.ID("token"), token))
	b.eval("leave the token box", `document.getElementById('token').dispatchEvent(new Event('change', {bubbles: true}))`, nil)
	b.run("the search appears", chromedp.WaitVisible(chromedp.ID("search-form")))
	var about string
	b.eval("the search summary", `document.getElementById('search-summary').textContent`, &about)
	if wantAbout := fmt.Sprintf("%d images indexed", x.Rows()); about != wantAbout {
		t.Errorf("before a search the summary is %q, want %q", about, wantAbout)
	}
	var labels []string
	b.eval("labels", `['query', 'top-k'].map((id) => { const l = document.querySelector('label[for="' + id + '"]'); return l ? l.textContent : ''; })`, &labels)
	for i, l := range labels {
		if l == "" {
			t.Errorf("search field %d has no label", i)
		}
	}

	// search clicks Search and returns #search-status once the page is
	// done or has failed.
	search := func(what string) string {
		t.Helper()
		b.eval(what, `document.getElementById('search-status').dataset.state = 'clicked'`, nil)
		b.run(what, chromedp.Click(chromedp.ID("search-button")))
		return b.poll(what+": waiting for #search-status",
			`(() => { const s = document.getElementById('search-status'); return (s.dataset.state === 'done' || s.dataset.state === 'error') && s.textContent; })()`)
	}
	b.run("type the query",
		chromedp.SendKeys(chromedp.ID("query"), query),
		chromedp.SetValue(chromedp.ID("top-k"), fmt.Sprint(topK)),
	)
	if st := search("search"); st != "done" {
		t.Fatalf("search: #search-status is %q, want done", st)
	}
	b.poll("the hits' sheets", fmt.Sprintf(`(() => { const hs = document.querySelectorAll('#hits article.hit');
		return hs.length === %d && Array.from(hs).every((h) => { const i = h.querySelector('img.sheet'); return i && i.complete; }); })()`, topK))
	var hits []searchHitInfo
	b.eval("the hits", `Array.from(document.querySelectorAll('#hits article.hit')).map((h) => {
		const i = h.querySelector('img.sheet');
		return { rank: +h.dataset.rank, path: h.dataset.path, loaded: !!i && i.complete && i.naturalWidth > 0, width: i ? i.naturalWidth : 0,
			words: Array.from(h.querySelectorAll('li[data-word]')).map((l) => ({ word: l.dataset.word, cell: l.dataset.cell, box: l.dataset.box, text: l.textContent })) };
	})`, &hits)
	if len(hits) != topK {
		t.Fatalf("%d hits shown, want %d", len(hits), topK)
	}
	if hits[0].Path != want.Hits[0].Path {
		t.Errorf("the first hit is %q; Index.Search's top hit is %q", hits[0].Path, want.Hits[0].Path)
	}
	for i, h := range hits {
		w := want.Hits[i]
		if h.Rank != i+1 || h.Path != w.Path {
			t.Errorf("hit %d: rank %d, path %q; want %d, %q", i, h.Rank, h.Path, i+1, w.Path)
		}
		if !h.Loaded {
			t.Errorf("hit %d (%s): the sheet image did not load (naturalWidth %d)", i, h.Path, h.Width)
		}
		if len(h.Words) != len(w.Words) {
			t.Errorf("hit %d: %d words shown, Index.Search gives %d", i, len(h.Words), len(w.Words))
			continue
		}
		for j, hw := range h.Words {
			ww := w.Words[j]
			cell := fmt.Sprintf("%d,%d", ww.Cell[0], ww.Cell[1])
			box := fmt.Sprintf("%d,%d,%d,%d", ww.Box[0], ww.Box[1], ww.Box[2], ww.Box[3])
			text := fmt.Sprintf("%s: peak %.3f at row %d, col %d; box rows %d–%d, cols %d–%d", ww.Word, ww.Peak, ww.Cell[0], ww.Cell[1], ww.Box[0], ww.Box[2], ww.Box[1], ww.Box[3])
			if hw.Word != ww.Word || hw.Cell != cell || hw.Box != box || !strings.HasPrefix(hw.Text, text) {
				t.Errorf("hit %d word %d: %q cell %s box %s (%q); Index.Search gives %q cell %s box %s (%q…)",
					i, j, hw.Word, hw.Cell, hw.Box, hw.Text, ww.Word, cell, box, text)
			}
		}
	}
	var segsHidden bool
	b.eval("the segments of images", `document.getElementById('segments-block').hidden && !document.querySelector('#segments article')`, &segsHidden)
	if !segsHidden {
		t.Error("a search over images shows video segments")
	}
	b.eval("scroll to the hits", `document.getElementById('search').scrollIntoView()`, nil)
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotPath := filepath.Join(artifactDir(t), "page-search.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shotPath)

	// A query the server refuses: its message in #search-status.
	b.run("a long query", chromedp.SetValue(chromedp.ID("query"), strings.Repeat("red ", 100)))
	st := search("a long query")
	var state string
	b.eval("the status state", `document.getElementById('search-status').dataset.state`, &state)
	if state != "error" || !strings.Contains(st, "query") {
		t.Errorf("a query the server refuses: #search-status is %q (%s), want the server's message", st, state)
	}

	for _, p := range b.problems() {
		t.Errorf("the page reported: %s", p)
	}

	// Without an index the search stays hidden.
	nb := newBrowserPage(t, bin)
	nb.open(plain.URL + "/")
	if got := nb.poll("the index check", `document.getElementById('search').dataset.index`); got != "none" {
		t.Errorf("without an index the check says %q, want none", got)
	}
	var shown struct {
		Hidden  bool
		Display string
	}
	nb.eval("the search without an index", `(() => { const s = document.getElementById('search'); return {Hidden: s.hidden, Display: getComputedStyle(s).display}; })()`, &shown)
	if !shown.Hidden || shown.Display != "none" {
		t.Errorf("without an index the search is hidden %v, display %q; want hidden", shown.Hidden, shown.Display)
	}
	for _, p := range nb.problems() {
		t.Errorf("the page without an index reported: %s", p)
	}
}

// TestPageSearchVideoInBrowser: over the index of a video, the page's
// search shows Index.Search's segments above the hits, each with its
// video, its start and end and its best frame's time in seconds, and the
// best frame's sheet, loaded; each hit says which video and when.
func TestPageSearchVideoInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary (install Debian's chromium, or set CHROMIUM to one)")
	}
	videotest.Need(t)
	const query, topK = "a yellow square", 2
	_, _, eng := newTestServer(t, false, Options{})
	in := t.TempDir()
	videotest.Make(t, in, "v.mp4", videotest.Frames(12, 64, 64), 4, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart")
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"x"}, Out: out, Index: true,
		Video: video.Options{FPS: 2}}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	_, ts, _ := newTestServer(t, false, Options{Index: x})
	want, err := x.Search(context.Background(), eng, query, index.SearchOptions{Top: topK, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Segments) == 0 {
		t.Fatal("Index.Search: no segments")
	}
	b := newBrowserPage(t, bin)
	b.open(ts.URL + "/")
	b.run("the search appears", chromedp.WaitVisible(chromedp.ID("search-form")))
	b.run("type the query",
		chromedp.SendKeys(chromedp.ID("query"), query),
		chromedp.SetValue(chromedp.ID("top-k"), fmt.Sprint(topK)),
		chromedp.Click(chromedp.ID("search-button")),
	)
	b.poll("the segments' sheets", fmt.Sprintf(`(() => { const ss = document.querySelectorAll('#segments article.segment');
		return ss.length === %d && Array.from(ss).every((s) => { const i = s.querySelector('img.sheet'); return i && i.complete && i.naturalWidth > 0; }); })()`, len(want.Segments)))
	var segs []struct {
		Rank             int
		Video, Text      string
		Start, End, Best float64
		Hidden           bool
		Words            int
	}
	b.eval("the segments", `Array.from(document.querySelectorAll('#segments article.segment')).map((s) => ({
		Rank: +s.dataset.rank, Video: s.dataset.video, Start: +s.dataset.start, End: +s.dataset.end, Best: +s.dataset.best,
		Text: s.textContent, Hidden: document.getElementById('segments-block').hidden, Words: s.querySelectorAll('li[data-word]').length }))`, &segs)
	for i, sg := range segs {
		w := want.Segments[i]
		when := fmt.Sprintf("%.2f s – %.2f s (%d frame", w.Start, w.End, w.Frames)
		if sg.Rank != i+1 || sg.Video != w.Video || sg.Start != w.Start || sg.End != w.End || sg.Best != *w.Best.Time || sg.Hidden ||
			!strings.Contains(sg.Text, when) || !strings.Contains(sg.Text, fmt.Sprintf("best at %.2f s", *w.Best.Time)) || sg.Words != len(w.Best.Words) {
			t.Errorf("segment %d shown: %+v; Index.Search gives %s %v-%v s best at %v s (want the text %q)", i, sg, w.Video, w.Start, w.End, *w.Best.Time, when)
		}
	}
	var hitText string
	b.eval("the first hit", `document.querySelector('#hits article.hit .meta').textContent`, &hitText)
	if wantText := fmt.Sprintf("at %.2f s of v.mp4", *want.Hits[0].Time); !strings.Contains(hitText, wantText) {
		t.Errorf("the first hit's meta %q, want %q in it", hitText, wantText)
	}
	b.eval("scroll to the segments", `document.getElementById('search').scrollIntoView()`, nil)
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotPath := filepath.Join(artifactDir(t), "page-search-video.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shotPath)
	for _, p := range b.problems() {
		t.Errorf("the page reported: %s", p)
	}
}
