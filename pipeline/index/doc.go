// Package index is the collection index reader: it opens the index a batch
// job writes with --index (package pipeline/batch), from a folder or, given
// a Store, from an object-store prefix (s3://, gs://, azblob://), searches
// it (Index.Search: every image's logit with a prompt, then where each
// word of the prompt is in the best hits), reads the hits' original images
// (Index.ReadImage), draws their heatmap sheets (Index.Sheets) and checks
// that a part is whole (CheckPart).
//
// The layout of an index part (its files and index.json, Meta) is defined
// here, for the writer and the reader alike.
package index
