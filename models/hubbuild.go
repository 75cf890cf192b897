package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/models/hub"
)

// maxIndexBytes bounds the model.safetensors.index.json fetched to learn a
// checkpoint's shards (real ones are tens of kilobytes).
const maxIndexBytes = 16 << 20

// hubFile says whether the hub model's commit has the file name: in the
// cache (meta nil), on the hub (meta: what a HEAD request said of it), or
// not at all (ok false, and recorded so). Offline, a file neither cached
// nor known to be absent is an ErrOffline error.
func (m *Model) hubFile(ctx context.Context, name string) (meta *hub.FileMeta, ok bool, err error) {
	cache := m.hub.Cache()
	if _, cached := cache.File(m.repo, m.revision, name); cached {
		return nil, true, nil
	}
	if cache.NoExist(m.repo, m.revision, name) {
		return nil, false, nil
	}
	if m.listed != nil && !m.listed[name] {
		cache.MarkNoExist(m.repo, m.revision, name)
		return nil, false, nil
	}
	if m.hub.Offline {
		return nil, false, offlineError(fmt.Sprintf("models: %s@%s (%s) has no ONNX graphs; they are built from its safetensors, and %s is not in the cache; %s",
			m.repo, m.revision, m.dir, name, offlineNote("fetch it", fetchWhere(m.ref))))
	}
	meta, err = m.hub.Metadata(ctx, m.repo, m.revision, name)
	if errors.Is(err, hub.ErrEntryNotFound) {
		return nil, false, nil // recorded by Metadata
	}
	if err != nil {
		return nil, false, fmt.Errorf("models: %w", err)
	}
	return meta, true, nil
}

// fetchCheckpoint makes the hub model's safetensors checkpoint whole in its
// snapshot: model.safetensors, else model.safetensors.index.json and the
// shards it names (open_clip_model.safetensors in OpenCLIP's layout). Nothing else is fetched (no pytorch_model.bin, no other
// framework's weights). The files missing from the cache are sized first
// (one HEAD request each); more than limit bytes of them (limit < 0: no
// limit) is an ErrBuildDownload error and nothing is downloaded. It
// returns the checkpoint's files in the snapshot, nil when the repository
// has neither file.
func (m *Model) fetchCheckpoint(ctx context.Context, limit int64) ([]string, error) {
	var names []string
	var fetch []*hub.FileMeta
	weights := graphbuild.SafetensorsFile
	if m.openCLIP {
		weights = OpenCLIPWeightsFile // never sharded
	}
	meta, ok, err := m.hubFile(ctx, weights)
	if err != nil {
		return nil, err
	}
	if !ok && m.openCLIP {
		return nil, nil
	}
	if ok {
		names = []string{weights}
		if meta != nil {
			fetch = append(fetch, meta)
		}
	} else {
		meta, ok, err := m.hubFile(ctx, graphbuild.IndexFile)
		if err != nil || !ok {
			return nil, err
		}
		if meta != nil {
			if meta.Size > maxIndexBytes {
				return nil, fmt.Errorf("models: %s@%s: %s is %d bytes; an index of shards is expected to be far smaller", m.repo, m.revision, graphbuild.IndexFile, meta.Size)
			}
			if _, err := m.hub.Fetch(ctx, meta); err != nil {
				return nil, fmt.Errorf("models: %w", err)
			}
		}
		b, err := os.ReadFile(filepath.Join(m.dir, graphbuild.IndexFile))
		if err != nil {
			return nil, fmt.Errorf("models: %w", err)
		}
		shards, err := indexShards(b)
		if err != nil {
			return nil, fmt.Errorf("models: %s@%s: %w", m.repo, m.revision, err)
		}
		for _, f := range shards {
			meta, ok, err := m.hubFile(ctx, f)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("models: %s@%s: %s names the shard %s, which the repository does not have", m.repo, m.revision, graphbuild.IndexFile, f)
			}
			if meta != nil {
				fetch = append(fetch, meta)
			}
		}
		names = shards
	}
	var total int64
	var what []string
	for _, f := range fetch {
		total += max(f.Size, 0)
		what = append(what, f.File)
	}
	if limit >= 0 && total > limit {
		return nil, fmt.Errorf("models: %s@%s has no ONNX graphs; building them needs its safetensors (%s), %s (%d bytes) to download, over the limit of %s (Options.MaxBuildDownload; negative for none): %w",
			m.repo, m.revision, strings.Join(what, ", "), byteSize(total), total, byteSize(limit), ErrBuildDownload)
	}
	if len(fetch) > 0 && m.log != nil {
		m.log.Info("downloading the model's safetensors to build its ONNX graphs (once; the graphs are kept in this program's cache)",
			"model", m.ref, "files", strings.Join(what, ", "), "bytes", total)
	}
	for _, meta := range fetch {
		got, err := m.hub.Fetch(ctx, meta)
		if err != nil {
			return nil, fmt.Errorf("models: %w", err)
		}
		if got.Downloaded && m.log != nil {
			m.log.Info("fetched", "repo", m.repo, "file", meta.File, "bytes", got.Size)
		}
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(m.dir, filepath.FromSlash(n))
	}
	return paths, nil
}

// byteSize writes n bytes for people: 605.2 MB, 1.71 GB.
func byteSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
