package main

import (
	"context"
)

// runModelsFetch downloads a hub model into the Hugging Face cache (or
// checks a folder) and describes it.
func runModelsFetch(ctx context.Context, e *env, args []string) error {
	m, o, err := openModelRef(ctx, e, "fetch", args)
	if err != nil {
		return err
	}
	return printModel(e, m, o.JSON)
}
