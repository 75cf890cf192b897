package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/conditionhq/condition/models/hub"
)

// statusLine is one line of progress on stderr, shared by every command
// that shows progress: redrawn in place on a terminal (fitted to its
// width, at most ten times a second), printed as a new line every few
// seconds otherwise, nothing when quiet.
type statusLine struct {
	mu       sync.Mutex
	w        io.Writer
	quiet    bool
	terminal bool
	fd       int
	every    time.Duration
	last     time.Time
	drawn    bool
}

func newStatusLine(w io.Writer, quiet bool) *statusLine {
	s := &statusLine{w: w, quiet: quiet, every: 5 * time.Second, last: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		s.terminal, s.fd, s.every = true, int(f.Fd()), 100*time.Millisecond
	}
	return s
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// show draws line, unless the last one was drawn too recently and force is
// false.
func (s *statusLine) show(line string, force bool) {
	if s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && time.Since(s.last) < s.every {
		return
	}
	s.last = time.Now()
	if !s.terminal {
		fmt.Fprintln(s.w, line)
		return
	}
	width := 80
	if w, _, err := term.GetSize(s.fd); err == nil && w > 0 {
		width = w
	}
	fmt.Fprintf(s.w, "\r\033[K%s", fit(line, width-1))
	s.drawn = true
}

// keep ends a line drawn in place with a newline, so that it stays.
func (s *statusLine) keep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn {
		fmt.Fprintln(s.w)
		s.drawn = false
	}
}

// done clears a line drawn in place, so that what follows starts clean.
func (s *statusLine) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn {
		fmt.Fprint(s.w, "\r\033[K")
		s.drawn = false
	}
}

// fit cuts line to at most width characters, marking the cut.
func fit(line string, width int) string {
	r := []rune(line)
	if width < 2 || len(r) <= width {
		return line
	}
	return string(r[:width-1]) + "…"
}

// bar returns "[===   ] " for done of total, or "" when the total
// is not known.
func bar(done, total, width int) string {
	if total <= 0 {
		return ""
	}
	k := min(width*done/total, width)
	return "[" + strings.Repeat("=", k) + strings.Repeat(" ", width-k) + "] "
}

// progressBar returns a callback showing a download on w's status line
// (see statusLine): the file, a bar, the bytes and the rate; each file's
// last line is kept.
func progressBar(w io.Writer) func(hub.Progress) {
	line := newStatusLine(w, false)
	var mu sync.Mutex
	var lastFile string
	start := time.Now()
	return func(p hub.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.File != lastFile {
			lastFile, start = p.File, time.Now()
		}
		done := p.Total >= 0 && p.Done >= p.Total
		rate := float64(p.Done) / max(time.Since(start).Seconds(), 1e-3)
		text := fmt.Sprintf("%s %s %s/s", shown(p.File), human(p.Done), human(int64(rate)))
		if p.Total > 0 {
			text = fmt.Sprintf("%s %s%3.0f%% %s/%s %s/s", shown(p.File), bar(int(p.Done>>10), int(p.Total>>10), 24),
				100*float64(p.Done)/float64(p.Total), human(p.Done), human(p.Total), human(int64(rate)))
		}
		line.show(text, done)
		if done {
			line.keep()
		}
	}
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
