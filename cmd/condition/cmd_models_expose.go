package main

import (
	"context"
	"fmt"
)

// runModelsExpose rewrites a model's graphs that output only pooled
// embeddings so that they also output their token or patch states.
func runModelsExpose(ctx context.Context, e *env, args []string) error {
	m, o, err := openModelRef(ctx, e, "expose", args)
	if err != nil {
		return err
	}
	res, err := m.Expose()
	if o.JSON {
		if jerr := writeJSONIndent(e.Stdout, res); jerr != nil {
			return jerr
		}
		return err
	}
	for _, r := range res {
		switch {
		case r.Missing:
			fmt.Fprintf(e.Stdout, "%s: not in the model\n", r.Graph)
		case r.Already:
			fmt.Fprintf(e.Stdout, "%s: already outputs last_hidden_state (%s)\n", r.Graph, r.Source)
		case r.Error != "":
			fmt.Fprintf(e.Stdout, "%s: not rewritten: %s\n", r.Graph, r.Error)
		default:
			fmt.Fprintf(e.Stdout, "%s: wrote %s\n", r.Graph, r.Written)
			for _, s := range r.Walk.Steps {
				fmt.Fprintf(e.Stdout, "  %s\n", s)
			}
		}
	}
	return err
}
