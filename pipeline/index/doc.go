// Package index is the collection index, in three parts: its format (the
// layout of an index part, below, which the batch job writes); its reader;
// and the client of a collection in a vector database (OpenCollection,
// CreateCollection and Collection: a Weaviate collection made apart from
// jobs or by the first job, which upserts into it; an Index opened on its
// URL searches it as it searches files).
//
// The reader opens the index a batch job writes (package pipeline/batch),
// from a folder or, given
// a Store, from an object-store prefix (s3://, gs://, azblob://), searches
// it (Index.Search: every image's logit with a prompt, then where each
// word of the prompt is in the best hits), reads the hits' original images
// (Index.ReadImage) and draws their heatmap sheets (Index.Sheets). Opening
// an index verifies its parts: each whole (index.json, and arrays of the
// shape and size it says), all of one model, settings, width and grid.
//
// The layout of an index part (its files, dtypes and index.json, Meta) is
// defined here, for the writer and the reader alike.
//
// A model whose images have their own patch grids (SigLIP 2 NaFlex) writes
// parts of format FormatGrids ("condition-index/v2"): the patches of each
// row padded with zeros to the model's patch budget (Meta.MaxPatches, in
// place of Meta.Grid) and GridsFile holding each row's grid. The format
// differs so that a reader knowing only Format ("condition-index/v1")
// refuses such a part by its format rather than misreading its rows; parts
// of one grid keep Format and their bytes. The reader takes both; one
// index holds parts of one kind. Every Hit carries its grid, and stage 2
// of a search, Patches and Sheets work on each image's own grid. A
// collection in Weaviate of such a model records the budget in its
// CollectionMeta (MaxPatches) and each object's grid in its "grid"
// property; a collection of one grid and one of per-image grids refuse
// each other's jobs.
package index
