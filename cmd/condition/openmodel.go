package main

import (
	"context"

	"github.com/conditionhq/condition/models"
)

// openModel resolves a --model reference for a command that runs it: a hub
// model missing from the cache is downloaded with a progress bar on stderr.
func openModel(ctx context.Context, e *env, ref, variant string) (*models.Model, error) {
	return models.OpenContext(ctx, ref, models.Options{Variant: variant, Progress: progressBar(e.Stderr), Logger: e.Log})
}
