// Package index is the collection index reader: it opens the index a batch
// job writes with --index (package pipeline/batch), from a folder or, given
// a Store, from an object-store prefix (s3://, gs://, azblob://), searches
// it (Index.Search: every image's logit with a prompt, then where each
// word of the prompt is in the best hits), reads the hits' original images
// (Index.ReadImage) and draws their heatmap sheets (Index.Sheets). Opening
// an index verifies its parts: each whole (index.json, and arrays of the
// shape and size it says), all of one model, settings, width and grid.
//
// The layout of an index part (its files, dtypes and index.json, Meta) is
// defined here, for the writer and the reader alike.
package index
