package video

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// seekGap is how many frames a jump to a key frame must skip for a decode
// at a rate to seek instead of decoding on: a new run of the concat list
// costs ffmpeg about the decoding of a few frames (it reopens the file,
// and the frames decoded past a run's last sample are wasted), so runs
// start only where at least this many frames would not be decoded.
const seekGap = 15

// packet is one packet of ffprobe -show_packets, in file order.
type packet struct {
	stream    int
	pts, dts  int64
	hasPTS    bool
	hasDTS    bool
	key, drop bool // flags K and D
}

// seekRun is one entry of the concat list: decode from the key frame
// before in (µs) to out (µs, exclusive, by decoding timestamp); dur is
// the entry's duration in the list (µs), chosen so that the concat
// demuxer leaves the timestamps as they are in the file.
type seekRun struct{ in, out, dur int64 }

// seekPlan is a decode at a rate that seeks: the concat list's runs and
// the pts of the sampled frames, in order.
type seekPlan struct {
	runs    []seekRun
	samples []int64
}

// planSeek plans a decode at fps frames a second of the video stream
// stream from its packets pk (every stream's, in file order, as ffprobe
// lists them; tbs are the streams' time bases): the sampled frames by
// the rule of SampleFPS (the frames in presentation order are the
// stream's packets sorted by pts), and the runs that decode them from
// key frames, a new run wherever jumping to the key frame before the next
// sample skips at least gap frames. ok is false when that gives one run
// (seeking would decode as much as decoding on), or when the packets do
// not allow it exactly: a video packet without timestamps or one the
// demuxer drops, two with one pts, a first packet that is not a key frame
// shown first at a time ≥ 0, a key frame with leading frames (see
// cleanKeys).
func planSeek(pk []packet, stream int, tbs map[int][2]int64, fps float64, gap int) (seekPlan, bool) {
	tb := tbs[stream]
	v, ok := streamPackets(pk, stream, tbs)
	if !ok || len(v) < 2 || !pk[v[0]].key {
		return seekPlan{}, false
	}
	// Presentation order: disp[j] is the place in v of the j-th frame shown.
	disp := make([]int, len(v))
	for j := range disp {
		disp[j] = j
	}
	sort.Slice(disp, func(a, b int) bool { return pk[v[disp[a]]].pts < pk[v[disp[b]]].pts })
	for j := 1; j < len(disp); j++ {
		if pk[v[disp[j]]].pts == pk[v[disp[j-1]]].pts {
			return seekPlan{}, false
		}
	}
	if disp[0] != 0 || pk[v[0]].pts < 0 {
		return seekPlan{}, false
	}
	keys, ok := cleanKeys(pk, v)
	if !ok {
		return seekPlan{}, false
	}
	var plan seekPlan
	var starts, lasts []int // per run: its key frame's place in disp, its last sample's place in v
	prev := -1              // the place in disp of the previous sample
	for _, j := range sampleFPS(pk, v, disp, tb, fps) {
		k := keyBefore(pk, v, keys, disp[j])
		kd := sort.Search(len(disp), func(d int) bool { return pk[v[disp[d]]].pts >= pk[v[k]].pts })
		if prev < 0 || kd > prev && kd-prev-1 >= gap {
			starts = append(starts, kd)
			lasts = append(lasts, disp[j])
		} else {
			lasts[len(lasts)-1] = max(lasts[len(lasts)-1], disp[j])
		}
		plan.samples = append(plan.samples, pk[v[disp[j]]].pts)
		prev = j
	}
	if len(starts) < 2 {
		return seekPlan{}, false
	}
	for r, kd := range starts {
		in := int64(0) // the first run starts at the file's start
		if r > 0 {
			in = ceilMicro(pk[v[disp[kd]]].pts, tb)
		}
		// The demuxer ends a run at the first packet, of any stream, whose
		// dts is at or past out: out is past every packet from the key
		// frame to the run's last sample.
		out := in + 1
		for i := v[disp[kd]]; i <= v[lasts[r]]; i++ {
			if pk[i].hasDTS {
				out = max(out, floorMicro(pk[i].dts, tbs[pk[i].stream])+1)
			}
		}
		plan.runs = append(plan.runs, seekRun{in: in, out: out})
	}
	for r := range plan.runs[:len(plan.runs)-1] {
		plan.runs[r].dur = plan.runs[r+1].in - plan.runs[r].in
		if plan.runs[r].dur <= 0 {
			return seekPlan{}, false
		}
	}
	return plan, true
}

// streamPackets returns the places in pk of stream's packets, and false
// when one has no pts or dts or is dropped by the demuxer, or a stream's
// time base is not known.
func streamPackets(pk []packet, stream int, tbs map[int][2]int64) ([]int, bool) {
	var v []int
	for i, p := range pk {
		if tb := tbs[p.stream]; tb[0] <= 0 || tb[1] <= 0 {
			return nil, false
		}
		if p.stream != stream {
			continue
		}
		if !p.hasPTS || !p.hasDTS || p.drop {
			return nil, false
		}
		v = append(v, i)
	}
	return v, true
}

// sampleFPS returns the places in disp of the frames SampleFPS keeps,
// computed as ffmpeg's select filter computes it: t = pts × (num/den) as
// a float64, kept when first or floor(t·fps) > floor(t'·fps).
func sampleFPS(pk []packet, v, disp []int, tb [2]int64, fps float64) []int {
	// The rate as the filter parses it back from the decode's -vf text.
	f, _ := strconv.ParseFloat(strconv.FormatFloat(fps, 'f', -1, 64), 64)
	unit := float64(tb[0]) / float64(tb[1])
	var out []int
	prev := math.NaN()
	for j, d := range disp {
		t := float64(pk[v[d]].pts) * unit
		if math.IsNaN(prev) || math.Floor(t*f) > math.Floor(prev*f) {
			out = append(out, j)
		}
		prev = t
	}
	return out
}

// cleanKeys returns the places in v of the key frames, and false when
// one of them has leading frames: a packet read after it but shown before
// it, as an open GOP's key frame has. Such a key frame refers to frames
// before it (it is not an IDR frame, in H.264's terms), and a decoder
// that reaches it from elsewhere in the file (the concat demuxer's next
// run) need not give the frames after it as a decode in order does
// (FFmpeg's H.264 decoder dropped a second of frames after one), so a
// video with one is decoded in order.
func cleanKeys(pk []packet, v []int) ([]int, bool) {
	var keys []int
	after := int64(math.MaxInt64) // the least pts after the place
	for i := len(v) - 1; i >= 0; i-- {
		p := pk[v[i]]
		if p.key {
			if p.pts > after {
				return nil, false
			}
			keys = append(keys, i)
		}
		after = min(after, p.pts)
	}
	for a, b := 0, len(keys)-1; a < b; a, b = a+1, b-1 {
		keys[a], keys[b] = keys[b], keys[a]
	}
	return keys, true
}

// keyBefore returns the place in v of the last key frame (keys,
// in file order, which is also their presentation order) shown at or
// before the frame at place s and read before it, or v's first packet.
func keyBefore(pk []packet, v, keys []int, s int) int {
	n := sort.Search(len(keys), func(i int) bool { return pk[v[keys[i]]].pts > pk[v[s]].pts })
	for n--; n >= 0; n-- {
		if keys[n] <= s {
			return keys[n]
		}
	}
	return 0
}

// ceilMicro is ts × tb in microseconds, rounded up.
func ceilMicro(ts int64, tb [2]int64) int64 {
	q, m := divMicro(ts, tb)
	if m {
		q++
	}
	return q
}

// floorMicro is ts × tb in microseconds, rounded down.
func floorMicro(ts int64, tb [2]int64) int64 {
	q, _ := divMicro(ts, tb)
	return q
}

// divMicro is ts × tb in microseconds rounded down, and whether a
// remainder was dropped.
func divMicro(ts int64, tb [2]int64) (int64, bool) {
	n := new(big.Int).Mul(big.NewInt(ts), new(big.Int).Mul(big.NewInt(tb[0]), big.NewInt(1e6)))
	q, m := new(big.Int).DivMod(n, big.NewInt(tb[1]), new(big.Int))
	return q.Int64(), m.Sign() != 0
}

// concatList is the ffconcat script of plan over the file at path: one
// entry per run, each reading path from its run's key frame.
func concatList(path string, plan seekPlan) string {
	var b strings.Builder
	b.WriteString("ffconcat version 1.0\n")
	q := "'" + strings.ReplaceAll("file:"+path, "'", `'\''`) + "'"
	for _, r := range plan.runs {
		b.WriteString("file " + q + "\ninpoint " + micro(r.in) + "\noutpoint " + micro(r.out) + "\n")
		if r.dur > 0 {
			b.WriteString("duration " + micro(r.dur) + "\n")
		}
	}
	return b.String()
}

// micro formats µs as seconds with six decimals, as ffconcat reads them.
func micro(us int64) string {
	sign := ""
	if us < 0 {
		sign, us = "-", -us
	}
	return fmt.Sprintf("%s%d.%06d", sign, us/1e6, us%1e6)
}
