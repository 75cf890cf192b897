package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/tensorio"
)

// HubCacheDir returns the Hugging Face hub cache folder: HF_HUB_CACHE, else
// HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func HubCacheDir() string { return hub.CacheDirFromEnv() }

// HubClient returns the hub client Open uses for opts: opts.Hub or one from
// the environment, with the options' cache folder, offline mode, progress
// callback and logger applied to a copy.
func HubClient(opts Options) *hub.Client {
	var c hub.Client
	if opts.Hub != nil {
		c = *opts.Hub
	} else {
		c = *hub.FromEnv()
	}
	if opts.HubCache != "" {
		c.CacheDir = opts.HubCache
	}
	if opts.Offline {
		c.Offline = true
	}
	if opts.Progress != nil {
		c.Progress = opts.Progress
	}
	if opts.Logger != nil {
		c.Logger = opts.Logger
	}
	return &c
}

// offlineNote says, in an error about something missing from the cache in
// offline mode, why the network was not used and what to do: unset
// HF_HUB_OFFLINE to todo ("fetch it") when it is the reason, or else. Offline
// mode the program chose is not blamed on the environment.
func offlineNote(todo, orElse string) string {
	if hub.OfflineFromEnv() {
		return "HF_HUB_OFFLINE is set: unset it to " + todo + ", or " + orElse
	}
	return "offline, so not fetched: " + orElse
}

// fetchWhere is the advice to fetch ref with a network.
func fetchWhere(ref string) string {
	return "fetch " + ref + " where there is a network (the files are kept in the cache)"
}

// headsWhere is the advice to fetch projection heads with a network.
const headsWhere = "open the model once where there is a network (the heads are kept in the cache)"

// offlineErr is an error of offline mode: it reads as its message and
// matches hub.ErrOffline.
type offlineErr struct{ msg string }

func offlineError(msg string) error { return &offlineErr{msg} }

func (e *offlineErr) Error() string { return e.msg }
func (e *offlineErr) Unwrap() error { return hub.ErrOffline }

// tokenizerFiles are the files a tokenizer is read from: a fast-tokenizer
// file, CLIP's BPE vocabulary and merges, or a SentencePiece model (SigLIP's
// spiece.model; tokenizer.model as Gemma and Llama name theirs).
var tokenizerFiles = []string{"tokenizer.json", "vocab.json", "merges.txt", "spiece.model", "tokenizer.model"}

// optionalFiles are fetched with a hub model when the repository has them:
// spiece.model too, since a SigLIP tokenizer is read from it before
// tokenizer.json, as transformers reads it (see text.LoadTokenizer).
var optionalFiles = append([]string{PreprocessorFile, "tokenizer_config.json", "special_tokens_map.json"}, tokenizerFiles...)

// openHub resolves org/name[@revision] in the cache, fetching what is missing.
func (m *Model) openHub(ctx context.Context, r hub.Ref, opts Options) error {
	ref := r.String()
	c := HubClient(opts)
	m.hub, m.repo = c, r.Repo
	cache := c.Cache()
	graphs := []string{variantName(TextModelFile, m.variant), variantName(VisionModelFile, m.variant)}
	// A cached snapshot with the config and both graphs (or a record that a
	// graph does not exist), and the files holding the graphs' external
	// data, is used without asking the hub.
	if commit, err := cache.Commit(r.Repo, r.Rev()); err == nil && (!opts.Update || c.Offline) {
		missing := missingFromSnapshot(cache, r.Repo, commit, graphs)
		// Offline, a snapshot without graphs still serves its config and
		// tokenizer; asking for a missing graph then names it. A graph whose
		// external data is missing is an error: ONNX Runtime could not load it.
		if len(missing.files) == 0 || (c.Offline && !missing.config && len(missing.side) == 0) {
			m.revision, m.dir = commit, cache.SnapshotDir(r.Repo, commit)
			m.base = os.DirFS(m.dir)
			return nil
		}
		if c.Offline {
			return offlineError(fmt.Sprintf("models: the cached %s@%s (%s) lacks %s; %s",
				r.Repo, r.Rev(), cache.SnapshotDir(r.Repo, commit), strings.Join(missing.files, ", "), offlineNote("fetch it", fetchWhere(ref))))
		}
	} else if c.Offline {
		return &locateError{offlineError(fmt.Sprintf("models: %s@%s is not in the Hugging Face cache %s (it needs %s); %s",
			r.Repo, r.Rev(), c.CacheDir, ConfigFile+", "+strings.Join(graphs, ", ")+" or the safetensors to build them from", offlineNote("fetch it", fetchWhere(ref))))}
	}
	info, err := c.ListFiles(ctx, r.Repo, r.Rev())
	if err != nil {
		err = fmt.Errorf("models: %w", err)
		if !errors.Is(err, hub.ErrRevisionNotFound) && !errors.Is(err, context.Canceled) {
			err = &locateError{err}
		}
		return err
	}
	commit := info.Commit
	has := map[string]bool{}
	for _, f := range info.Files {
		has[f] = true
	}
	config := ConfigFile
	if !has[ConfigFile] && has[OpenCLIPConfigFile] {
		// OpenCLIP's layout: its config and checkpoint are read as a
		// folder's (openCLIPLayout); a pickle alone is refused here, before
		// any download.
		config = OpenCLIPConfigFile
		if err := openCLIPPickleOnly(has, fmt.Sprintf("hub model %s@%s (commit %s)", r.Repo, r.Rev(), commit)); err != nil {
			return err
		}
	}
	if !has[config] {
		return fmt.Errorf("models: hub model %s@%s (commit %s) has no %s (nor OpenCLIP's %s); is it a model in the Hugging Face or OpenCLIP layout?",
			r.Repo, r.Rev(), commit, ConfigFile, OpenCLIPConfigFile)
	}
	var present []string
	for _, g := range graphs {
		if has[g] {
			present = append(present, g)
		} else {
			cache.MarkNoExist(r.Repo, commit, g)
		}
	}
	if len(present) == 0 && m.variant != "" {
		return fmt.Errorf("models: hub model %s@%s has no %s variant (%s, %s); graph variants present: %s",
			r.Repo, r.Rev(), m.variant, graphs[0], graphs[1], listOrNone(variantsOf(info.Files)))
	}
	fetch := func(f string) error {
		got, err := c.Download(ctx, r.Repo, commit, f)
		if err != nil {
			return fmt.Errorf("models: %w", err)
		}
		if got.Downloaded && opts.Logger != nil {
			opts.Logger.Info("fetched", "repo", r.Repo, "file", f, "bytes", got.Size)
		}
		return nil
	}
	for _, f := range append([]string{config}, present...) {
		if err := fetch(f); err != nil {
			return err
		}
	}
	// The files holding the graphs' external data, read from the graphs
	// themselves, beside them in the snapshot.
	for _, g := range present {
		side, err := sideFiles(cache, r.Repo, commit, g)
		if err != nil {
			return err
		}
		for _, f := range side {
			if !has[f] {
				return fmt.Errorf("models: hub model %s@%s (commit %s): %s keeps tensor data in %s, which the repository does not have",
					r.Repo, r.Rev(), commit, g, f)
			}
			if err := fetch(f); err != nil {
				return err
			}
		}
	}
	for _, f := range optionalFiles {
		if has[f] {
			if err := fetch(f); err != nil {
				return err
			}
		}
	}
	m.revision, m.dir = commit, cache.SnapshotDir(r.Repo, commit)
	m.base = os.DirFS(m.dir)
	// The checkpoint (graphs to build) and the projection heads are fetched
	// once the config is read (OpenContext); a repository without
	// model.safetensors is recorded so, for later opens from the cache.
	m.listed = has
	if !has[WeightsFile] {
		cache.MarkNoExist(r.Repo, commit, WeightsFile)
	}
	return nil
}

// fetchHeads makes the heads of repo's model.safetensors available at
// revision rev (commit, when known, is the commit rev is at; "" to ask the
// hub): the file itself when small or already cached, else the heads read by
// ranges into the derived cache, <derived>/models--org--name/<commit>/
// condition-heads.safetensors. It returns the path to read them from. The
// hub is asked about the file once (one HEAD request); the download or the
// range reads reuse that answer.
func fetchHeads(ctx context.Context, c *hub.Client, derived derivedCache, repo, rev, commit string, maxDownload int64) (string, error) {
	if maxDownload <= 0 {
		maxDownload = SmallWeights
	}
	cache := c.Cache()
	if commit != "" {
		if p, ok := cachedHeads(cache, derived, repo, commit); ok {
			return p, nil
		}
	}
	at := rev
	if commit != "" {
		at = commit
	}
	if c.Offline {
		return "", offlineError(fmt.Sprintf("models: neither %s nor its heads (%s) of %s@%s are in the cache; %s", WeightsFile, HeadsFile, repo, at, offlineNote("fetch them", headsWhere)))
	}
	meta, err := c.Metadata(ctx, repo, at, WeightsFile)
	if err != nil {
		return "", fmt.Errorf("models: weights %s@%s: %w", repo, at, err)
	}
	if commit == "" {
		if err := cache.WriteRef(repo, rev, meta.Commit); err != nil {
			return "", fmt.Errorf("models: %w", err)
		}
		if p, ok := cachedHeads(cache, derived, repo, meta.Commit); ok {
			return p, nil
		}
	}
	if meta.Size >= 0 && meta.Size <= maxDownload {
		f, err := c.Fetch(ctx, meta)
		if err != nil {
			return "", fmt.Errorf("models: %w", err)
		}
		return f.Path, nil
	}
	isHead := map[string]bool{}
	for _, n := range append(slices.Clone(HeadNames), SiglipHeadNames...) {
		isHead[n] = true
	}
	heads, err := c.ReadTensorsFunc(ctx, meta, func(n string) bool { return isHead[n] })
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	if len(heads) == 0 {
		return "", fmt.Errorf("models: %s@%s: %s has none of the heads of CLIP (%s) or SigLIP (%s)", repo, meta.Commit, WeightsFile, strings.Join(HeadNames, ", "), strings.Join(SiglipHeadNames, ", "))
	}
	note := map[string]string{"format": "pt", "source": repo + "@" + meta.Commit + ":" + WeightsFile,
		"note": "projection heads read by condition with HTTP range requests"}
	p, err := derived.write(repo, meta.Commit, HeadsFile, func(w io.Writer) error {
		b, err := tensorio.EncodeSafetensors(heads, note)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("models: heads of %s@%s: %w", repo, meta.Commit, err)
	}
	return p, nil
}
