package main

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/tensorio"
)

// runModelsVerify re-hashes a cached hub model, or checks that a folder's
// files parse.
func runModelsVerify(ctx context.Context, e *env, args []string) error {
	o, ref, err := parseModelRef(e, "verify", args)
	if err != nil {
		return err
	}
	return verifyModel(e, ref, o)
}

// verifyModel re-hashes a cached hub model, or checks that the files of
// a model folder or of the built-in model parse (they have no hashes to be
// checked against).
func verifyModel(e *env, ref string, o modelFlags) error {
	type result struct {
		Ref    string      `json:"ref"`
		Commit string      `json:"commit,omitempty"`
		Checks []hub.Check `json:"checks"`
		OK     bool        `json:"ok"`
		Note   string      `json:"note,omitempty"` // what was checked, when not hashes
	}
	res := result{Ref: ref, OK: true}
	graphRef, _, err := models.SplitRef(ref)
	if err != nil {
		return err
	}
	mr, err := models.ParseRef(graphRef)
	if err != nil {
		return err
	}
	if r := mr.Hub; r.Repo != "" {
		dir := o.HubCache
		if dir == "" {
			dir = hub.CacheDirFromEnv()
		}
		cache := hub.Cache{Dir: dir}
		commit, err := cache.Commit(r.Repo, r.Rev())
		if err != nil {
			return fmt.Errorf("no folder %s; as a hub id: %w (fetch it with `condition models fetch %s`)", graphRef, err, graphRef)
		}
		res.Commit = commit
		bar := progressBar(e.Stderr)
		res.Checks, err = cache.Verify(r.Repo, commit, func(file string, done, total int64) {
			if total > 64<<20 {
				bar(hub.Progress{File: file, Done: done, Total: total})
			}
		})
		if err != nil {
			return fmt.Errorf("%w (fetch it with `condition models fetch %s`)", err, graphRef)
		}
	} else {
		m, err := models.Open(ref, models.Options{HubCache: o.HubCache, Offline: true, Variant: o.Variant, NoBuild: true})
		if err != nil {
			return advise(err, ref)
		}
		res.Checks = checkModelFiles(m)
		if m.Dir() == "" {
			res.Note = "built into the program: there are no hashes to check its files against; they parse"
		} else {
			res.Note = "a folder: there are no hashes to check its files against; they parse"
		}
	}
	for _, c := range res.Checks {
		res.OK = res.OK && c.OK
	}
	if o.JSON {
		if err := writeJSONIndent(e.Stdout, res); err != nil {
			return err
		}
	} else {
		for _, c := range res.Checks {
			status := "ok"
			if !c.OK {
				status = "FAILED: " + c.Reason
			} else if c.Kind == "" {
				status = "ok (" + c.Reason + ")"
			}
			fmt.Fprintf(e.Stdout, "%-40s %-11s %10s  %s\n", c.File, c.Kind, human(c.Size), status)
		}
	}
	if !res.OK {
		if res.Commit == "" {
			return exitError{code: exitFailed, msg: fmt.Sprintf("verify: some files of %s do not parse", ref)}
		}
		return exitError{code: exitFailed, msg: "verify: some files do not match their hashes (delete them from the cache and fetch again)"}
	}
	if res.Note != "" && !o.JSON {
		fmt.Fprintf(e.Stdout, "%s: %s\n", ref, res.Note)
	}
	return nil
}

// checkModelFiles checks that the graphs and model.safetensors of a model
// that is not a cached hub snapshot (a folder, the built-in model) parse.
// Files are read through the model, so the built-in one's too.
func checkModelFiles(m *models.Model) []hub.Check {
	var checks []hub.Check
	size := func(name string) int64 {
		if fi, err := fs.Stat(m.FS(), name); err == nil {
			return fi.Size()
		}
		return 0
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		ck := hub.Check{File: g, Kind: "onnx", Size: size(g)}
		if gi := m.DescribeGraph(g); gi == nil {
			ck.Reason = "missing"
		} else if gi.Error != "" {
			ck.Reason = gi.Error
		} else {
			ck.OK = true
		}
		checks = append(checks, ck)
	}
	if m.Has(models.WeightsFile) {
		ck := hub.Check{File: models.WeightsFile, Kind: "safetensors", Size: size(models.WeightsFile)}
		b, err := m.ReadFile(models.WeightsFile)
		if err == nil {
			_, _, err = tensorio.DecodeSafetensors(b)
		}
		if err != nil {
			ck.Reason = err.Error()
		} else {
			ck.OK = true
		}
		checks = append(checks, ck)
	}
	return checks
}
