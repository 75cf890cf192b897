package video

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// errLogEnded: ffmpeg wrote a frame whose showinfo line never came.
var errLogEnded = errors.New("ffmpeg's log ended before a frame's time")

// stamp is one frame's line of showinfo: its pts in the time base of the
// config line before it, and its size.
type stamp struct {
	pts  int64
	tb   [2]int64
	w, h int
	err  error
}

// ffLog reads ffmpeg's log (-loglevel level+info): showinfo's lines give
// the frames' times, in order, on times; the first line of level error or
// worse is kept in err (read it once the log has ended).
type ffLog struct {
	times chan stamp
	err   string
}

func newLog() *ffLog { return &ffLog{times: make(chan stamp, 4096)} }

var (
	configRe = regexp.MustCompile(`Parsed_showinfo_\d+ @ [^\]]*\] \[info\] config in time_base: (\d+)/(\d+)`)
	frameRe  = regexp.MustCompile(`Parsed_showinfo_\d+ @ [^\]]*\] \[info\] n: *\d+ pts: *(\S+) .* s:(\d+)x(\d+) `)
	levelRe  = regexp.MustCompile(`\[(error|fatal|panic)\] `)
)

func (l *ffLog) read(r io.Reader) {
	defer close(l.times)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	tb := [2]int64{0, 0}
	for sc.Scan() {
		line := sc.Text()
		if m := configRe.FindStringSubmatch(line); m != nil {
			tb[0], _ = strconv.ParseInt(m[1], 10, 64)
			tb[1], _ = strconv.ParseInt(m[2], 10, 64)
			continue
		}
		if m := frameRe.FindStringSubmatch(line); m != nil {
			st := stamp{tb: tb}
			st.w, _ = strconv.Atoi(m[2])
			st.h, _ = strconv.Atoi(m[3])
			var err error
			if st.pts, err = strconv.ParseInt(m[1], 10, 64); err != nil {
				st.err = fmt.Errorf("a frame without a presentation time (pts %s)", m[1])
			} else if tb[1] <= 0 {
				st.err = fmt.Errorf("a frame before its time base")
			}
			l.times <- st
			continue
		}
		if l.err == "" && levelRe.MatchString(line) {
			l.err = strings.TrimSpace(levelRe.ReplaceAllString(line, ""))
		}
	}
	io.Copy(io.Discard, r)
}
