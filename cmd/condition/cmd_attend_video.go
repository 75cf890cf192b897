package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/draw"
	"io"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision/video"
)

// stripFrames is how many frames, evenly spaced, a video's heatmap strip
// shows.
const stripFrames = 6

// frameWords is one sampled frame of a video attended with one prompt:
// each content word's peak (its map's largest value) and where.
type frameWords struct {
	Prompt string     `json:"prompt"`
	Video  string     `json:"video"`
	Time   float64    `json:"time"`
	Words  []wordPeak `json:"words"`
}

// wordPeak is a word's peak on one frame: the value (a cosine in the
// joint space, or an attention weight) at Cell [row, col].
type wordPeak struct {
	Word string  `json:"word"`
	Peak float32 `json:"peak"`
	Cell [2]int  `json:"cell"`
}

// stripFrame is a frame kept for the heatmap strip.
type stripFrame struct {
	index int
	time  float64
	base  image.Image
	atts  []pipeline.Attention // one per prompt
}

// strip keeps frames evenly spaced over a video of unknown length: every
// stride-th frame, the stride doubled (and every other kept frame
// dropped) when more than twice the frames wanted are kept.
type strip struct {
	stride int
	kept   []stripFrame
}

func (s *strip) add(f stripFrame) {
	if f.index%s.stride != 0 {
		return
	}
	s.kept = append(s.kept, f)
	if len(s.kept) <= 2*stripFrames {
		return
	}
	s.stride *= 2
	n := 0
	for _, k := range s.kept {
		if k.index%s.stride == 0 {
			s.kept[n] = k
			n++
		}
	}
	s.kept = s.kept[:n]
}

// chosen returns up to stripFrames of the kept frames, evenly spaced,
// the first and the last among them.
func (s *strip) chosen() []stripFrame {
	if len(s.kept) <= stripFrames {
		return s.kept
	}
	out := make([]stripFrame, stripFrames)
	for j := range out {
		out[j] = s.kept[j*(len(s.kept)-1)/(stripFrames-1)]
	}
	return out
}

// attendVideo is attend of a video: every sampled frame attended with
// the prompts, printed one line a frame (each word's peak and its cell),
// and a strip of a few frames' sheets.
func attendVideo(ctx context.Context, e *env, o *attendOptions, eng *pipeline.Engine, prompts pipeline.Prompts, path string) error {
	st := &strip{stride: 1}
	rows := make([][]frameWords, len(prompts))
	enc := json.NewEncoder(e.Stdout)
	_, err := video.DecodeFile(ctx, path, o.video, func(f video.Frame) error {
		atts, err := eng.AttendImages(ctx, []image.Image{f.Image}, prompts, pipeline.AttendOptions{Windows: o.windows})
		if err != nil {
			return fmt.Errorf("frame at %s s: %w", video.Seconds(f.Time), err)
		}
		for k := range atts[0] {
			fw := peaks(&atts[0][k], filepath.Base(path), f.Time)
			if o.json {
				if err := enc.Encode(fw); err != nil {
					return err
				}
			}
			rows[k] = append(rows[k], fw)
		}
		if !o.noHeatmap {
			var base image.Image = eng.HeatmapBase(f.Image)
			if o.windows {
				base = f.Image
			}
			st.add(stripFrame{index: f.Index, time: f.Time, base: base, atts: atts[0]})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", shown(path), err)
	}
	if len(rows[0]) == 0 {
		return fmt.Errorf("%s: no frame sampled", shown(path))
	}
	names := make([]string, len(prompts))
	if !o.noHeatmap {
		if names, err = writeStrips(o, path, st.chosen(), len(prompts)); err != nil {
			return err
		}
	}
	if !o.json {
		for k, p := range prompts {
			printFramePeaks(e.Stdout, p.Text, rows[k], names[k])
		}
	}
	return nil
}

// peaks is each content word's peak on a frame.
func peaks(a *pipeline.Attention, name string, t float64) frameWords {
	fw := frameWords{Prompt: a.Prompt.Text, Video: name, Time: t, Words: []wordPeak{}}
	for _, ov := range a.Overlays() {
		r, c := ov.PeakCell()
		fw.Words = append(fw.Words, wordPeak{Word: ov.Label, Peak: ov.Map[r*a.Grid.W+c], Cell: [2]int{r, c}})
	}
	return fw
}

// printFramePeaks prints one prompt's frames: time, then per word its
// peak and cell.
func printFramePeaks(w io.Writer, prompt string, rows []frameWords, heatmap string) {
	fmt.Fprintf(w, "%s  %d frames  per word: peak value at cell row,col\n", quotePrompt(prompt), len(rows))
	head := fmt.Sprintf("%9s", "time s")
	for _, wp := range rows[0].Words {
		head += fmt.Sprintf("  %-16s", wp.Word)
	}
	fmt.Fprintln(w, strings.TrimRight(head, " "))
	for _, r := range rows {
		line := fmt.Sprintf("%9.3f", r.Time)
		for _, wp := range r.Words {
			line += fmt.Sprintf("  %-16s", fmt.Sprintf("%.3f %d,%d", wp.Peak, wp.Cell[0], wp.Cell[1]))
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	if heatmap != "" {
		fmt.Fprintf(w, "  heatmap: %s\n", shown(heatmap))
	}
}

// writeStrips writes each prompt's strip: the sheets of the chosen
// frames, one under the other, each labelled with its time; it returns
// their file names.
func writeStrips(o *attendOptions, path string, frames []stripFrame, prompts int) ([]string, error) {
	names := make([]string, prompts)
	for k := range prompts {
		name := o.heatmap
		if name == "" {
			name = filepath.Base(path) + ".heatmap.png"
		}
		if prompts > 1 {
			name = strings.TrimSuffix(name, ".png") + fmt.Sprintf(".%d.png", k)
		}
		var sheets []*image.RGBA
		height, width := 0, 0
		for _, f := range frames {
			a := f.atts[k]
			a.ImageLabel = fmt.Sprintf("t=%.2f s", f.time)
			sheet, err := a.Heatmap(f.base)
			if err != nil {
				return nil, err
			}
			sheets = append(sheets, sheet)
			height, width = height+sheet.Bounds().Dy(), max(width, sheet.Bounds().Dx())
		}
		all := image.NewRGBA(image.Rect(0, 0, width, height))
		y := 0
		for _, s := range sheets {
			draw.Draw(all, s.Bounds().Add(image.Pt(0, y)), s, s.Bounds().Min, draw.Src)
			y += s.Bounds().Dy()
		}
		data, err := pipeline.EncodePNG(all)
		if err != nil {
			return nil, err
		}
		if err := tensorio.WriteFileAtomic(name, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}); err != nil {
			return nil, err
		}
		names[k] = name
	}
	return names, nil
}
