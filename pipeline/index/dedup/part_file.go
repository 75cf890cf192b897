package dedup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/conditionhq/condition/tensorio"
)

// PartFormat is the format of a share's part (PartFile "format").
const PartFormat = "condition-dedup-part/v1"

// The files of a part folder.
const (
	PartFile    = "dedup-part.json" // Part as JSON, written last
	PairsFile   = "pairs.npy"       // [M, 2] int64: the rows A < B of each pair
	CosinesFile = "cosines.npy"     // [M] float32: each pair's cosine
	NearestFile = "nearest.npy"     // [N] float32: each row's nearest cosine (NaN: none), with Part.Nearest
)

// IsPart reports whether dir holds a part (its PartFile).
func IsPart(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, PartFile))
	return err == nil && st.Mode().IsRegular()
}

// Write writes p into the new folder dir: its pairs, then PartFile, into
// a temporary folder beside dir renamed to dir at the end, so that a
// killed share leaves no part. An existing dir is refused.
func (p *Part) Write(dir string) (err error) {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("dedup: part folder %s exists", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("dedup: %w", err)
	}
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("dedup: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return fmt.Errorf("dedup: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	rows, cos := make([]int64, 2*len(p.Pairs)), make([]float32, len(p.Pairs))
	for i, q := range p.Pairs {
		rows[2*i], rows[2*i+1], cos[i] = int64(q.A), int64(q.B), q.Cos
	}
	if err := tensorio.WriteNPY(filepath.Join(tmp, PairsFile), tensorio.I64([]int{len(p.Pairs), 2}, rows)); err != nil {
		return fmt.Errorf("dedup: %w", err)
	}
	if err := tensorio.WriteNPY(filepath.Join(tmp, CosinesFile), tensorio.F32([]int{len(p.Pairs)}, cos)); err != nil {
		return fmt.Errorf("dedup: %w", err)
	}
	if p.Nearest {
		if err := tensorio.WriteNPY(filepath.Join(tmp, NearestFile), tensorio.F32([]int{len(p.NN)}, p.NN)); err != nil {
			return fmt.Errorf("dedup: %w", err)
		}
	}
	p.NumPairs = len(p.Pairs)
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("dedup: %w", err)
	}
	if err := tensorio.WriteFileAtomic(filepath.Join(tmp, PartFile), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("dedup: %w", err)
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("dedup: part folder %s appeared while the share ran: its part is left in %s", dir, tmp)
	}
	return os.Rename(tmp, dir)
}

// ReadPart reads the part in dir (Part.Write), checking that its files
// agree: as many pairs as it says, each of two rows A < B of the index.
func ReadPart(dir string) (*Part, error) {
	b, err := os.ReadFile(filepath.Join(dir, PartFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("dedup: %s is not a part of a split search: no %s", dir, PartFile)
		}
		return nil, fmt.Errorf("dedup: %w", err)
	}
	p := &Part{Name: dir}
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("dedup: part %s: %s: %w", dir, PartFile, err)
	}
	if p.Format != PartFormat {
		return nil, fmt.Errorf("dedup: part %s: format %q, want %q", dir, p.Format, PartFormat)
	}
	rows, err := tensorio.ReadNPY(filepath.Join(dir, PairsFile))
	if err != nil {
		return nil, fmt.Errorf("dedup: part %s: %w", dir, err)
	}
	cos, err := tensorio.ReadNPY(filepath.Join(dir, CosinesFile))
	if err != nil {
		return nil, fmt.Errorf("dedup: part %s: %w", dir, err)
	}
	r, ok1 := rows.Data.([]int64)
	c, ok2 := cos.Data.([]float32)
	if !ok1 || !ok2 || len(r) != 2*p.NumPairs || len(c) != p.NumPairs {
		return nil, fmt.Errorf("dedup: part %s: want %s of int64 [%d, 2] and %s of float32 [%d] (its %s says %d pairs), got %s %v and %s %v",
			dir, PairsFile, p.NumPairs, CosinesFile, p.NumPairs, PartFile, p.NumPairs, rows.DType, rows.Shape, cos.DType, cos.Shape)
	}
	p.Pairs = make([]Pair, p.NumPairs)
	for i := range p.Pairs {
		a, b := int(r[2*i]), int(r[2*i+1])
		if a < 0 || a >= b || b >= p.Rows {
			return nil, fmt.Errorf("dedup: part %s: pair %d is of rows %d and %d: want 0 ≤ A < B < %d", dir, i, a, b, p.Rows)
		}
		p.Pairs[i] = Pair{a, b, c[i]}
	}
	if p.Nearest {
		nn, err := tensorio.ReadNPY(filepath.Join(dir, NearestFile))
		if err != nil {
			return nil, fmt.Errorf("dedup: part %s: %w", dir, err)
		}
		if p.NN, _ = nn.Data.([]float32); len(p.NN) != p.Rows {
			return nil, fmt.Errorf("dedup: part %s: want %s of float32 [%d], got %s %v", dir, NearestFile, p.Rows, nn.DType, nn.Shape)
		}
	}
	return p, nil
}
