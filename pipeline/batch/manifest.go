package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
)

// Status values of a manifest entry.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Entry is one line of manifest.jsonl: what became of one input image.
type Entry struct {
	Path     string             `json:"path"`              // relative path (the output name)
	Source   string             `json:"source,omitempty"`  // the path that was read (for a tar member, its shard)
	Caption  string             `json:"caption,omitempty"` // a tar sample's own caption
	SHA256   string             `json:"sha256,omitempty"`  // of the source bytes (a video's frame: of its RGBA pixels)
	Status   string             `json:"status"`            // "ok" or "error"
	Error    string             `json:"error,omitempty"`
	Outputs  []string           `json:"outputs,omitempty"`    // relative to the output folder
	Object   string             `json:"object,omitempty"`     // its object in the job's collection in Weaviate (Config.Collection): weaviate://HOST:PORT/Name/<id>
	Scores   []Score            `json:"scores,omitempty"`     // the model's logit per prompt, in prompt order
	Width    int                `json:"width,omitempty"`      // source size after orientation
	Height   int                `json:"height,omitempty"`     //
	Timings  map[string]float64 `json:"timings_ms,omitempty"` // per stage
	Settings string             `json:"settings"`             // hash of the job's settings
	Video    string             `json:"video,omitempty"`      // a video's frame: the video's relative path
	Time     *float64           `json:"time,omitempty"`       // a video's frame: its presentation time in seconds
}

// Score is one prompt's score for an image: the logit, exp(logit_scale) ·
// cosine (+ logit_bias for SigLIP). Prompts are numbered from 0 in the
// order given, as in the output files' prompt.<k>. tensors. A SigLIP model
// scores each prompt on its own: Sigmoid is then sigmoid(Score), the
// probability that the prompt describes the image (CLIP's logits have no
// meaning alone, so a CLIP entry has none).
type Score struct {
	Prompt  int      `json:"prompt"`
	Text    string   `json:"text"`
	Score   float64  `json:"score"`
	Sigmoid *float64 `json:"sigmoid,omitempty"`
}

// manifestFile appends entries to a JSONL file as a job goes. Each entry is
// written with one write call on a file opened for appending, so a killed
// process leaves at most one partial last line, which the next reader drops.
type manifestFile struct {
	mu sync.Mutex
	f  *os.File
}

// openManifest opens name in out for appending. Without resume the file is
// started anew; with resume a partial last line (from a killed process) is
// cut off and the complete entries are returned.
func openManifest(out *outFolder, name string, resume bool) (*manifestFile, []Entry, error) {
	var prior []Entry
	if resume {
		b, err := out.ReadFile(name)
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, fmt.Errorf("batch: read manifest %q: %w", name, err)
		}
		if len(b) > 0 {
			complete := bytes.LastIndexByte(b, '\n') + 1
			if complete < len(b) {
				if err := out.Truncate(name, int64(complete)); err != nil {
					return nil, nil, fmt.Errorf("batch: repair manifest %q: %w", name, err)
				}
			}
			prior, err = ParseManifest(bytes.NewReader(b[:complete]))
			if err != nil {
				return nil, nil, fmt.Errorf("batch: manifest %q: %w", name, err)
			}
		}
	}
	f, err := out.OpenAppend(name, !resume)
	if err != nil {
		return nil, nil, err
	}
	return &manifestFile{f: f}, prior, nil
}

// Add appends one entry (one write call; the file is synced by Close).
func (m *manifestFile) Add(e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("batch: manifest: %w", err)
	}
	b = append(b, '\n')
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return fmt.Errorf("batch: manifest is closed")
	}
	if _, err := m.f.Write(b); err != nil {
		return fmt.Errorf("batch: manifest: %w", err)
	}
	return nil
}

// Close syncs and closes the file. It is safe to call more than once.
func (m *manifestFile) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return nil
	}
	err := m.f.Sync()
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	m.f = nil
	return err
}

// ParseManifest reads JSONL entries. Blank lines are skipped; a line that is
// not an entry is an error naming its number.
func ParseManifest(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if e.Path == "" || (e.Status != StatusOK && e.Status != StatusError) {
			return nil, fmt.Errorf("line %d: not a manifest entry (path %q, status %q)", n, e.Path, e.Status)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Latest keeps the last entry per path (a resumed job appends new entries
// after old ones), sorted by path.
func Latest(entries []Entry) []Entry {
	last := map[string]Entry{}
	for _, e := range entries {
		last[e.Path] = e
	}
	out := make([]Entry, 0, len(last))
	for _, e := range last {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
