package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
)

// tuneSetting is one combination `condition-bench pipeline --tune` tries.
type tuneSetting struct {
	Streams  int       `json:"streams"`
	Threads  int       `json:"threads"`
	Batch    int       `json:"batch"`
	Spinning bool      `json:"spinning"`
	NoArena  bool      `json:"no_arena"`
	Pinned   bool      `json:"pinned"`
	Rates    []float64 `json:"rounds_images_per_sec"`
	Median   float64   `json:"median_images_per_sec"`
}

// tuneSettings lists the combinations for a machine of cores cores: every
// split of the cores into streams × threads (1, 2, 4 streams), batches of
// 8, 16 and 32, ONNX Runtime's threads spinning or not, its memory arena on
// or off, its pool threads pinned to processors or not.
func tuneSettings(cores int, batches []int) []tuneSetting {
	var out []tuneSetting
	for _, streams := range []int{1, 2, 4} {
		if streams > cores {
			continue
		}
		threads := max(1, cores/streams)
		for _, b := range batches {
			for _, spin := range []bool{false, true} {
				for _, noArena := range []bool{false, true} {
					for _, pin := range []bool{false, true} {
						if (spin || pin) && threads == 1 {
							continue // one thread has nothing to spin for and no pool thread to pin
						}
						out = append(out, tuneSetting{Streams: streams, Threads: threads, Batch: b, Spinning: spin, NoArena: noArena, Pinned: pin})
					}
				}
			}
		}
	}
	return out
}

// runPipeTune runs the whole job on images with each setting, o.rounds
// rounds in an order that turns each round, and prints the medians, best
// first, and the flags of run for the best.
func runPipeTune(ctx context.Context, e *env, o pipeBenchOptions, m *models.Model, images, tmp string) error {
	batches := []int{8, 16, 32}
	settings := tuneSettings(runtime.GOMAXPROCS(0), batches)
	type engineKey struct {
		threads            int
		spin, noArena, pin bool
	}
	engines := map[engineKey]*pipeline.Engine{}
	defer func() {
		for _, eng := range engines {
			eng.Close()
		}
	}()
	for r := 0; r < o.rounds; r++ {
		for j := range settings {
			s := &settings[(j+r)%len(settings)]
			k := engineKey{s.Threads, s.Spinning, s.NoArena, s.Pinned}
			eng, ok := engines[k]
			if !ok {
				var err error
				if eng, err = openEngine(ctx, e, m, pipeline.Options{Threads: s.Threads, NoSpinning: !s.Spinning, NoArena: s.NoArena, PinThreads: s.Pinned, Decode: o.mode, Readout: o.readouts[0], KeepGraphs: o.keep}); err != nil {
					return err
				}
				engines[k] = eng
			}
			out := filepath.Join(tmp, fmt.Sprintf("tune-%d-%d", r, j))
			cfg := batch.Config{Engine: eng, Inputs: []string{images}, Prompts: []string{"a red circle", "a blue square"},
				Out: out, Batch: s.Batch, Workers: o.workers, Streams: s.Streams, Version: version, Log: e.Log}
			_, rate, err := pipebench.JobRate(ctx, cfg)
			os.RemoveAll(out)
			if err != nil {
				return err
			}
			s.Rates = append(s.Rates, rate.PerSec())
			e.Log.Info("pipeline --tune", "round", r+1, "streams", s.Streams, "threads", s.Threads, "batch", s.Batch,
				"spinning", s.Spinning, "arena", !s.NoArena, "pinned", s.Pinned, "images/s", fmt.Sprintf("%.2f", rate.PerSec()))
		}
	}
	for i := range settings {
		settings[i].Median = pipebench.Median(settings[i].Rates)
	}
	sort.SliceStable(settings, func(a, b int) bool { return settings[a].Median > settings[b].Median })
	if o.json {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"model": m.Name(), "variant": m.Variant(), "rounds": o.rounds, "settings": settings,
			"recommended": settings[pickTuned(settings)]})
	}
	fmt.Fprintf(e.Stdout, "model %s%s, %d cores; the whole job, medians of %d rounds in turned order:\n", m.Name(), variantNote(m), runtime.GOMAXPROCS(0), o.rounds)
	for _, s := range settings {
		fmt.Fprintf(e.Stdout, "  %d stream(s) × %d thread(s), batch %2d, spinning %-5v arena %-5v pinned %-5v %7.2f images/s  (%.2f× the slowest)\n",
			s.Streams, s.Threads, s.Batch, s.Spinning, !s.NoArena, s.Pinned, s.Median, s.Median/settings[len(settings)-1].Median)
	}
	bi := pickTuned(settings)
	best := settings[bi]
	if bi != 0 {
		fmt.Fprintf(e.Stdout, "the fastest's rounds overlap those of settings that change less; of those, the one with the fewest changes from run's defaults (then the fastest):\n")
	}
	fmt.Fprintf(e.Stdout, "best: condition run --streams %d --threads %d --batch %d", best.Streams, best.Threads, best.Batch)
	if best.NoArena {
		fmt.Fprint(e.Stdout, " --no-arena")
	}
	if best.Pinned {
		fmt.Fprint(e.Stdout, " --pin-threads")
	}
	if m.Variant() != "" {
		fmt.Fprintf(e.Stdout, " --variant %s", m.Variant())
	}
	if o.readouts[0] != "" {
		fmt.Fprintf(e.Stdout, " --readout %s", o.readouts[0])
	}
	fmt.Fprintln(e.Stdout)
	if best.Spinning {
		fmt.Fprintln(e.Stdout, "  (measured with ONNX Runtime's threads spinning between calls; run keeps them from spinning)")
	}
	return nil
}

func variantNote(m *models.Model) string {
	if m.Variant() == "" {
		return ""
	}
	return " (variant " + m.Variant() + ")"
}

// pickTuned returns the index of the setting to recommend. settings are
// sorted fastest first, each with its rounds' rates; those whose best round
// reached the fastest setting's worst round cannot be told from it, and of
// them it picks the one that changes the fewest of run's defaults (no
// spinning, the arena on, threads not pinned), the fastest of those: a
// difference smaller than the machine's noise is no reason to set a flag.
func pickTuned(settings []tuneSetting) int {
	if len(settings) == 0 || len(settings[0].Rates) == 0 {
		return 0
	}
	floor := settings[0].Rates[0]
	for _, r := range settings[0].Rates {
		floor = min(floor, r)
	}
	changes := func(s tuneSetting) int {
		n := 0
		for _, b := range []bool{s.Spinning, s.NoArena, s.Pinned} {
			if b {
				n++
			}
		}
		return n
	}
	best := 0
	for i, s := range settings[1:] {
		top := 0.0
		for _, r := range s.Rates {
			top = max(top, r)
		}
		if top >= floor && changes(s) < changes(settings[best]) {
			best = i + 1
		}
	}
	return best
}
