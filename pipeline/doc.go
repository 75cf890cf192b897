// Package pipeline is condition's engine: one model ready to use, opened
// once and shared by any number of goroutines.
//
// Open (a model folder, a hub id org/name[@revision], or "default" where
// models/embedded is linked) and New return an *Engine holding the
// tokenizer (package text), the image preprocessing (package vision), both
// ONNX Runtime encoders (package models/clip) and the attention layers
// (package xattn: CLIP's joint space by default, a learned diffusers layer,
// or identity). It encodes prompts (EncodeTexts) and images (EncodeImages,
// EncodeImageData, EncodePixels, and streams of them), compares them
// (Similarity), prepares prompts once (Prepare: their keys and values for
// image → text [P, T], their queries for text → image [T, P]) and attends an
// image with them either or both ways (Attend): maps, conditioned rows,
// per-head maps, CLIP scores, heatmaps. Classify scores labels.
//
// What is shared and what is per call: the Engine and its prepared prompts
// are read-only once made and safe to share; the values a call returns are
// the caller's. Close releases the encoders' ONNX Runtime sessions.
//
// The batch job over many images is package pipeline/batch, the reader of
// the collection index it writes package pipeline/index, and the HTTP
// service package pipeline/serve. The package never prints or exits: logs
// go through an optional *slog.Logger.
package pipeline
