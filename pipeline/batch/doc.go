// Package batch is the batch job on the engine (package pipeline): images
// from folders, files, WebDataset tar shards, object-store prefixes and
// lists → decode → encode → attend → per-image files or shards of stacked
// arrays with Parquet metadata, heatmaps, and the collection index.
//
// Run (given a Config) walks its inputs and works through them with bounded
// queues, writes every output and its manifest line atomically, resumes a
// stopped job (Config.Resume) and takes its share of a job split across
// processes (Config.Shard); Merge joins the manifests of such a job and
// proves it complete. The index a job writes (Config.Index) is read by
// package pipeline/index.
//
// The package never prints or exits: progress goes through a callback and
// logs through an optional *slog.Logger. Its errors begin with "batch: ".
package batch
