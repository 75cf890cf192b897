package models

import (
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/models/hub"
)

// snapshotGaps is what a cached snapshot lacks for a model.
type snapshotGaps struct {
	config bool     // the config is missing
	side   []string // external-data files of cached graphs
	files  []string // everything missing, for messages
}

// missingFromSnapshot lists what repo@commit's snapshot lacks: the config,
// graphs neither cached nor recorded as absent, and the external-data files
// of the graphs it has.
func missingFromSnapshot(cache hub.Cache, repo, commit string, graphs []string) snapshotGaps {
	var g snapshotGaps
	_, hf := cache.File(repo, commit, ConfigFile)
	_, oc := cache.File(repo, commit, OpenCLIPConfigFile) // OpenCLIP's layout
	if !hf && !oc {
		g.config = true
		g.files = append(g.files, ConfigFile)
	}
	// A snapshot holding no tokenizer file at all was fetched without one
	// (by a version that knew fewer of their names): ask the hub again.
	// One in OpenCLIP's layout alone needs none (Model.OpenAIBPE).
	tok := oc && !hf
	for _, f := range tokenizerFiles {
		if _, ok := cache.File(repo, commit, f); ok {
			tok = true
			break
		}
	}
	if !tok {
		g.files = append(g.files, "a tokenizer ("+strings.Join(tokenizerFiles, ", ")+")")
	}
	for _, name := range graphs {
		if _, ok := cache.File(repo, commit, name); !ok {
			if !cache.NoExist(repo, commit, name) {
				g.files = append(g.files, name)
			}
			continue
		}
		side, err := sideFiles(cache, repo, commit, name)
		if err != nil {
			what := fmt.Sprintf("the external data of %s (%v)", name, err)
			g.side = append(g.side, what)
			g.files = append(g.files, what)
			continue
		}
		for _, f := range side {
			if _, ok := cache.File(repo, commit, f); !ok {
				g.side = append(g.side, f)
				g.files = append(g.files, f)
			}
		}
	}
	return g
}

// sideFiles returns the files, as paths in the repository, that hold the
// external data of the cached graph repo@commit:graph: the locations its
// initializers name, relative to the graph's folder. Only the graph's
// framing is read (onnxgraph.ExternalDataFiles), not its tensors.
func sideFiles(cache hub.Cache, repo, commit, graph string) ([]string, error) {
	p, ok := cache.File(repo, commit, graph)
	if !ok {
		return nil, fmt.Errorf("models: %s@%s: %s is not in the cache", repo, commit, graph)
	}
	out, err := externalSides(p, graph)
	if err != nil {
		return nil, fmt.Errorf("models: %s@%s: %s: %w", repo, commit, graph, err)
	}
	return out, nil
}

// externalSides returns the files that hold the external data of the graph
// file p, as slash-separated paths beside graph, p's name in its model.
// Each location must stay inside the graph's folder.
func externalSides(p, graph string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	locs, err := onnxgraph.ExternalDataFiles(f, fi.Size())
	if err != nil {
		return nil, err
	}
	return sidesOf(graph, locs)
}

// sidesOf turns the external-data locations a graph names into paths beside
// it, checking that each stays inside the graph's folder.
func sidesOf(graph string, locs []string) ([]string, error) {
	out := make([]string, 0, len(locs))
	for _, l := range locs {
		if err := onnxgraph.CheckLocation(l); err != nil {
			return nil, err
		}
		out = append(out, path.Join(path.Dir(graph), l))
	}
	return out, nil
}
