package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/conditionhq/condition/pipeline/index"
)

// nearInfo is what the test reads of a hit's near-duplicates on the page.
type nearInfo struct {
	State string `json:"state"`
	Text  string `json:"text"`
	Items []struct {
		Path   string `json:"path"`
		Cosine string `json:"cosine"`
	} `json:"items"`
}

// TestPageNeighboursInBrowser drives a hit's Near-duplicates in headless
// Chromium, over a job's index of the scenes and a byte copy of each: a
// search's hits each have the button; clicked at cosine 0.99 the first
// hit lists what Index.Neighbours gives (its copy, at cosine 1), and at
// 0.3 the 20 most alike of the count Index.Neighbours gives, in its
// order; a cosine out of range is refused on the page, naming it. The
// page logs no CSP violation or error. It saves a screenshot.
func TestPageNeighboursInBrowser(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("no Chromium binary (install Debian's chromium, or set CHROMIUM to one)")
	}
	_, _, eng := newTestServer(t, false, Options{})
	x := twinsIndex(t, eng)
	_, ts, _ := newTestServer(t, false, Options{Index: x})
	const query, topK = "a yellow star", 3
	want, err := x.Search(context.Background(), eng, query, index.SearchOptions{Top: topK})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserPage(t, bin)
	b.open(ts.URL + "/")
	b.run("the search appears", chromedp.WaitVisible(chromedp.ID("search-form")))
	b.run("search", chromedp.SendKeys(chromedp.ID("query"), query), chromedp.SetValue(chromedp.ID("top-k"), fmt.Sprint(topK)), chromedp.Click(chromedp.ID("search-button")))
	b.poll("the hits", fmt.Sprintf(`document.querySelectorAll('#hits article.hit button.near-button').length === %d`, topK))
	var label string
	b.eval("the threshold's label", `document.querySelector('label[for="near-threshold"]').textContent`, &label)
	if label == "" {
		t.Error("the near-duplicate cosine has no label")
	}
	near := func(what, threshold string) nearInfo {
		t.Helper()
		b.run(what, chromedp.SetValue(chromedp.ID("near-threshold"), threshold))
		b.eval(what, `(() => { const s = document.querySelector('#hits article.hit .near-status'); s.dataset.state = 'clicked'; document.querySelector('#hits article.hit button.near-button').click(); })()`, nil)
		b.poll(what+": waiting", `(() => { const s = document.querySelector('#hits article.hit .near-status'); return s.dataset.state === 'done' || s.dataset.state === 'error'; })()`)
		var n nearInfo
		b.eval(what, `(() => { const h = document.querySelector('#hits article.hit'), s = h.querySelector('.near-status');
			return { state: s.dataset.state, text: s.textContent, items: Array.from(h.querySelectorAll('ul.near-list li')).map((l) => ({ path: l.dataset.path, cosine: l.dataset.cosine })) }; })()`, &n)
		return n
	}
	first := want.Hits[0]
	for _, c := range []struct {
		threshold string
		top       int
	}{{"0.99", 20}, {"0.3", 20}} {
		th, _ := strconv.ParseFloat(c.threshold, 32)
		ref, count, err := x.Neighbours(context.Background(), first.Part, first.Row, float32(th), c.top)
		if err != nil {
			t.Fatal(err)
		}
		n := near("near-duplicates at "+c.threshold, c.threshold)
		if n.State != "done" || len(n.Items) != len(ref) || !strings.HasPrefix(n.Text, fmt.Sprintf("%d image", count)) {
			t.Fatalf("at %s: %+v; Index.Neighbours gives %d of %d", c.threshold, n, len(ref), count)
		}
		for i, it := range n.Items {
			cos, err := strconv.ParseFloat(it.Cosine, 32)
			if it.Path != ref[i].Path || err != nil || float32(cos) != ref[i].Score {
				t.Errorf("at %s: item %d %s cosine %s; Index.Neighbours %s %v", c.threshold, i, it.Path, it.Cosine, ref[i].Path, ref[i].Score)
			}
		}
		if c.threshold == "0.99" && (len(ref) != 1 || filepath.Base(ref[0].Path) != filepath.Base(first.Path) || ref[0].Score < 0.999) {
			t.Errorf("at 0.99 %s has neighbours %+v, want only its copy", first.Path, ref)
		}
		if count > len(ref) && !strings.Contains(n.Text, fmt.Sprintf("the %d most alike shown", len(ref))) {
			t.Errorf("at %s: %q does not say %d of %d are shown", c.threshold, n.Text, len(ref), count)
		}
	}
	if n := near("a cosine out of range", "1.5"); n.State != "error" || !strings.Contains(n.Text, "near-duplicate cosine") {
		t.Errorf("cosine 1.5: %+v, want the page to refuse it", n)
	}
	b.run("back to 0.99", chromedp.SetValue(chromedp.ID("near-threshold"), "0.99"))
	near("near-duplicates again", "0.99")
	b.eval("scroll to the hits", `document.getElementById('hits').scrollIntoView()`, nil)
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shotPath := filepath.Join(artifactDir(t), "page-neighbours.png")
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shotPath)
	for _, p := range b.problems() {
		t.Errorf("the page reported: %s", p)
	}
}
