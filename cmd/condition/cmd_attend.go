package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision/video"
)

type attendOptions struct {
	eng       engineFlags
	prompts   []string
	heatmap   string
	noHeatmap bool
	top       int
	json      bool
	windows   bool
	fps       float64       // a video's frames sampled per second
	frames    string        // a video's frames: fps, all or keyframes
	video     video.Options // --fps and --frames, parsed
}

func (o *attendOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&o.prompts, "prompt", "p", nil, "prompt text; repeatable")
	fs.StringVar(&o.heatmap, "heatmap", "", "heatmap PNG to write (default: <image name>.heatmap.png in the current folder; with several prompts, .<i>.png)")
	fs.BoolVar(&o.noHeatmap, "no-heatmap", false, "do not write a heatmap")
	fs.IntVar(&o.top, "top", 3, "how many patches per word and words per region to print")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON (maps included)")
	fs.BoolVar(&o.windows, "windows", false, windowsUsage)
	fs.Float64Var(&o.fps, "fps", video.DefaultFPS, "frames per second of a video attended, the first frame at or after each k/FPS seconds (as run)")
	fs.StringVar(&o.frames, "frames", "fps", "which frames of a video are attended: fps (see --fps), all, keyframes, or scene[:THRESHOLD] (as run)")
	o.eng.AddFlags(fs, withImages|withPrompts|withPrecision|withReadout)
}

type attendReport struct {
	Prompt      string                 `json:"prompt"`
	Readout     string                 `json:"readout,omitempty"` // --readout, when not raw
	Windows     bool                   `json:"windows,omitempty"` // the maps cover the whole image (--windows)
	Score       float64                `json:"score"`
	Tokens      []string               `json:"tokens"`
	Grid        [2]int                 `json:"grid"`
	Words       []pipeline.WordPatches `json:"words"`
	Regions     []pipeline.Region      `json:"regions"`
	Heatmap     string                 `json:"heatmap,omitempty"`
	TextToImage []float32              `json:"text_to_image,omitempty"`
	// Similarity [T, P] is each token's cosine with each patch in CLIP's
	// joint space: the scale of the words' patches and heatmaps.
	Similarity  []float32 `json:"similarity,omitempty"`
	ImageToText []float32 `json:"image_to_text,omitempty"`
	// Scale is what the words' patch values are: "cosine" (the joint
	// space's token–patch cosine, one scale for every word and image) or
	// "attention" (the word's attention map).
	Scale string `json:"scale"`
}

func runAttend(ctx context.Context, e *env, args []string) error {
	var o attendOptions
	fs := newFlagSet(e, "attend", "attend IMAGE|VIDEO --prompt TEXT [--prompt TEXT]... [flags]\n\nA video ("+strings.Join(video.Exts(), " ")+", decoded by FFmpeg) gives one line per sampled frame (each word's peak and its cell) and a heatmap strip of a few frames")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("attend takes one image, got %d arguments", fs.NArg())
	}
	if len(o.prompts) == 0 {
		return usagef("no prompt: give --prompt TEXT")
	}
	if o.top < 1 {
		return usagef("--top must be at least 1")
	}
	path := fs.Arg(0)
	if err := checkFiles(path); err != nil {
		return err
	}
	isVideo := video.IsName(path)
	if isVideo {
		var err error
		if o.video, err = videoSampling(o.frames, o.fps, o.eng.maxPixels); err != nil {
			return err
		}
	} else if fs.Changed("fps") || fs.Changed("frames") {
		return usagef("--fps and --frames are for a video (%s); %s is an image", strings.Join(video.Exts(), " "), shown(path))
	}
	// One image: the sessions start without packing their weights first.
	eng, err := o.eng.open(ctx, e, pipeline.Options{NoPrepack: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	prompts, err := eng.Prepare(ctx, o.prompts...)
	if err != nil {
		return o.eng.advise(err)
	}
	for i, p := range prompts {
		if len(p.Content) == 0 {
			return usagef("--prompt %d %q has no word to map: every word is a stop word (a, the, of, ...); name what to look for", i, p.Text)
		}
	}
	if isVideo {
		return attendVideo(ctx, e, &o, eng, prompts, path)
	}
	return attendImage(ctx, e, &o, eng, prompts, path)
}

// attendImage is attend of an image: each prompt's words and regions
// printed, its sheet written.
func attendImage(ctx context.Context, e *env, o *attendOptions, eng *pipeline.Engine, prompts pipeline.Prompts, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	img, err := eng.DecodeImage(data)
	if err != nil {
		return fmt.Errorf("%s: %w", shown(path), err)
	}
	atts, err := eng.AttendImages(ctx, []image.Image{img}, prompts, pipeline.AttendOptions{Windows: o.windows})
	if err != nil {
		return fmt.Errorf("%s: %w", shown(path), err)
	}
	var base image.Image = eng.HeatmapBase(img)
	if o.windows {
		base = img // the maps cover the whole image
	}
	var reports []attendReport
	for k, a := range atts[0] {
		r := summarise(&a, o.top)
		if rd := eng.Options().Readout; rd != pipeline.ReadoutRaw {
			r.Readout = string(rd)
		}
		r.Windows = o.windows
		overlays := a.Overlays()
		if !o.noHeatmap && len(overlays) > 0 {
			name := o.heatmap
			if name == "" {
				name = filepath.Base(path) + ".heatmap.png"
			}
			if len(atts[0]) > 1 {
				name = strings.TrimSuffix(name, ".png") + fmt.Sprintf(".%d.png", k)
			}
			sheet, err := a.Heatmap(base)
			if err != nil {
				return err
			}
			data, err := pipeline.EncodePNG(sheet)
			if err != nil {
				return err
			}
			if err := tensorio.WriteFileAtomic(name, func(w io.Writer) error {
				_, err := w.Write(data)
				return err
			}); err != nil {
				return err
			}
			r.Heatmap = name
		}
		if o.json {
			r.TextToImage, r.ImageToText, r.Similarity = a.TextToImage, a.ImageToText, a.Similarity
		}
		reports = append(reports, r)
	}
	if o.json {
		enc := json.NewEncoder(e.Stdout)
		for _, r := range reports {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range reports {
		fmt.Fprintf(e.Stdout, "%q  score %.2f  grid %dx%d\n", r.Prompt, r.Score, r.Grid[0], r.Grid[1])
		if r.Scale == "cosine" {
			fmt.Fprintln(e.Stdout, "  word → patches most like it (row,col: cosine in the joint space)")
		} else {
			fmt.Fprintln(e.Stdout, "  word → patches it attends to most (row,col: weight)")
		}
		for _, w := range r.Words {
			fmt.Fprintf(e.Stdout, "    %-12s %s\n", w.Word, formatScored(w.Patches))
		}
		fmt.Fprintln(e.Stdout, "  image region → words most specific to it (lift: the region's weight over the whole image's; weight)")
		for _, rg := range r.Regions {
			fmt.Fprintf(e.Stdout, "    %-12s %s\n", rg.Region, formatLifted(rg.Words))
		}
		if r.Heatmap != "" {
			fmt.Fprintf(e.Stdout, "  heatmap: %s\n", shown(r.Heatmap))
		}
	}
	return nil
}

func formatScored(xs []pipeline.Scored) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%s: %.3f", x.Name, x.Weight)
	}
	return strings.Join(parts, "  ")
}

func formatLifted(xs []pipeline.Scored) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%s: %.2f× %.3f", x.Name, x.Lift, x.Weight)
	}
	return strings.Join(parts, "  ")
}

// summarise reports, per content word, its top patches (text → image, or
// the image → text column when that is all there is) and, per 3×3 region of
// the grid, the words its patches attend to most (image → text).
func summarise(a *pipeline.Attention, top int) attendReport {
	ps := a.Prompt
	r := attendReport{Prompt: ps.Text, Score: a.Score, Tokens: ps.Tokens, Grid: [2]int{a.Grid.H, a.Grid.W}, Scale: "attention",
		Words: a.TopPatches(top), Regions: a.RegionWords(top)}
	if a.Similarity != nil {
		r.Scale = "cosine"
	}
	return r
}
