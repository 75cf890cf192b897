package batch

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/internal/objstore"
)

// A list names images one by one: a text file with one path per line
// (blank lines and lines starting with # skipped), or a CSV or Parquet
// file with a "path" or "url" column (img2dataset's Parquet as written).
// Relative paths are relative to the list's folder. Each entry is an Item
// named by its path (cleaned; an absolute path loses its leading /),
// assigned to shards by that name. Entries are read as the walk goes, a
// batch at a time, never the whole list at once.

// listKind returns how to read a list file by its extension.
func listKind(p string) string {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".csv":
		return "csv"
	case ".parquet":
		return "parquet"
	}
	return "text"
}

// list walks the entries of the list file p.
func (w *walker) list(p string) error {
	emit := func(entry string) error {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil
		}
		if objstore.IsURL(entry) {
			return w.emit(listObject(entry))
		}
		if strings.Contains(entry, "://") {
			return w.emit(Item{Path: entry, Rel: urlName(entry), Err: fmt.Errorf("%s: web URLs are not fetched (give local paths or s3://, gs://, azblob:// URLs)", p)})
		}
		full := entry
		if !filepath.IsAbs(full) {
			full = filepath.Join(filepath.Dir(p), entry)
		}
		rel := path.Clean(filepath.ToSlash(entry))
		rel = strings.TrimLeft(rel, "/")
		for strings.HasPrefix(rel, "../") {
			rel = rel[3:]
		}
		return w.emit(Item{Path: full, Rel: rel})
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("batch: list %s: %w", p, err)
	}
	defer f.Close()
	switch listKind(p) {
	case "csv":
		return w.csvList(p, f, emit)
	case "parquet":
		return w.parquetList(p, f, emit)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for first := true; sc.Scan(); first = false {
		line := sc.Text()
		if first {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if err := emit(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("batch: list %s: %w", p, err)
	}
	return nil
}

func (w *walker) csvList(p string, r io.Reader, emit func(string) error) error {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("batch: list %s: header: %w", p, err)
	}
	col := -1
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if h == "path" || (h == "url" && col < 0) {
			col = i
		}
	}
	if col < 0 {
		return fmt.Errorf("batch: list %s: no \"path\" or \"url\" column (columns: %s)", p, strings.Join(header, ", "))
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch: list %s: %w", p, err)
		}
		if col >= len(rec) {
			return fmt.Errorf("batch: list %s: line %d has %d fields, no %q", p, line, len(rec), header[col])
		}
		if err := emit(rec[col]); err != nil {
			return err
		}
	}
}

// listRow is the part of a Parquet list's rows the walk reads.
type listRow struct {
	Path *string `parquet:"path,optional"`
	URL  *string `parquet:"url,optional"`
}

func (w *walker) parquetList(p string, f *os.File, emit func(string) error) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("batch: list %s: %w", p, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("batch: list %s: %w", p, err)
	}
	var hasPath, hasURL bool
	for _, c := range pf.Schema().Fields() {
		hasPath = hasPath || c.Name() == "path"
		hasURL = hasURL || c.Name() == "url"
	}
	if !hasPath && !hasURL {
		var names []string
		for _, c := range pf.Schema().Fields() {
			names = append(names, c.Name())
		}
		return fmt.Errorf("batch: list %s: no \"path\" or \"url\" column (columns: %s)", p, strings.Join(names, ", "))
	}
	rd := parquet.NewGenericReader[listRow](pf)
	defer rd.Close()
	rows := make([]listRow, 256)
	for {
		n, err := rd.Read(rows)
		for _, r := range rows[:n] {
			var v string
			switch {
			case hasPath && r.Path != nil:
				v = *r.Path
			case r.URL != nil:
				v = *r.URL
			}
			if err := emit(v); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch: list %s: %w", p, err)
		}
	}
}

// urlName is the output name of a URL entry: its host and path.
func urlName(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	rest = path.Clean("/" + rest)
	return strings.TrimLeft(rest, "/")
}
