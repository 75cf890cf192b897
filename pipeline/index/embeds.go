package index

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/conditionhq/condition/internal/halfdot"
)

// errCollectionEmbeds is the error of reading the stored arrays of a
// collection in a vector database, which has none on this side.
var errCollectionEmbeds = errors.New("index: a collection in a vector database has no stored image embeddings to read row by row; give a job's index folder or prefix")

// EmbedsDType returns the dtype every part stores its image embeddings in
// (DTypeF16, DTypeF32 or DTypeInt8); "" when the parts differ, and for a
// collection in a vector database.
func (x *Index) EmbedsDType() string {
	if x.coll != nil || len(x.parts) == 0 {
		return ""
	}
	dt := x.parts[0].dtype
	for _, p := range x.parts[1:] {
		if p.dtype != dt {
			return ""
		}
	}
	return dt
}

// rowsOf calls fn for each stretch of the rows [r0, r0+n) that lies in
// one part: the part, its first row there, how many, and where the
// stretch starts among the n rows. Rows are numbered over the parts in
// order, from 0 to Rows()-1.
func (x *Index) rowsOf(r0, n int, fn func(p *indexPart, row, k, at int) error) error {
	if x.closed {
		return ErrClosed
	}
	if x.coll != nil {
		return errCollectionEmbeds
	}
	if r0 < 0 || n < 0 || r0+n > x.rows {
		return fmt.Errorf("index: index %s: rows %d to %d of %d", x.where, r0, r0+n, x.rows)
	}
	base, at := 0, 0
	for _, p := range x.parts {
		end := base + p.meta.Rows
		if n > 0 && r0 < end {
			k := min(end-r0, n)
			if err := fn(p, r0-base, k, at); err != nil {
				return err
			}
			r0, n, at = r0+k, n-k, at+k
		}
		base = end
	}
	return nil
}

// ReadEmbeds copies the stored image embeddings of rows r0, r0+1, … of
// the index into dst, [n, D] float32 (n = len(dst)/D, D = Meta().Dim),
// dequantised (float16 and int8·scale are exact in float32). Rows are
// numbered over the parts in order (Parts), from 0 to Rows()-1, and a
// span may cross parts. ok, when not nil, gets n flags: whether each row
// is an image read and encoded (a failed image's row holds zeros).
//
// The rows are read from the parts' files, not through their mappings: a
// reader that goes once over every row (dedup) leaves none of them in its
// resident memory, only in the system's page cache.
func (x *Index) ReadEmbeds(r0 int, dst []float32, ok []bool) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	d := x.meta.Dim
	return x.rowsOf(r0, len(dst)/max(d, 1), func(p *indexPart, row, k, at int) error {
		out := dst[at*d : (at+k)*d]
		if p.dtype == DTypeF32 {
			if err := p.readRows(row, k, bytesOf(out)); err != nil {
				return err
			}
		} else {
			raw := make([]byte, k*p.rowBytes())
			if err := p.readRows(row, k, raw); err != nil {
				return err
			}
			p.toFloat32(raw, row, k, out)
		}
		p.okRows(row, k, ok, at)
		return nil
	})
}

// ReadEmbedsF16 is ReadEmbeds for an index whose parts store float16
// (EmbedsDType): dst, [n, D], gets the values' bits as stored.
func (x *Index) ReadEmbedsF16(r0 int, dst []uint16, ok []bool) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	d := x.meta.Dim
	return x.rowsOf(r0, len(dst)/max(d, 1), func(p *indexPart, row, k, at int) error {
		if p.dtype != DTypeF16 {
			return fmt.Errorf("index: index part %s stores %s, not float16", p.where, p.dtype)
		}
		if err := p.readRows(row, k, bytesOf(dst[at*d:(at+k)*d])); err != nil {
			return err
		}
		p.okRows(row, k, ok, at)
		return nil
	})
}

// rowBytes is the size of one stored image embedding of p.
func (p *indexPart) rowBytes() int {
	if p.meta.Rows == 0 {
		return 0
	}
	return len(p.embeds) / p.meta.Rows
}

// readRows reads rows [row, row+k) of p's image embeddings as stored into
// dst (k rows' bytes) from the part's file.
func (p *indexPart) readRows(row, k int, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	if p.embFile == nil {
		return fmt.Errorf("index: index part %s: %s is not open", p.where, EmbedsFile)
	}
	if _, err := p.embFile.ReadAt(dst, p.embOff+int64(row)*int64(p.rowBytes())); err != nil {
		return fmt.Errorf("index: index part %s: %s rows %d to %d: %w", p.where, EmbedsFile, row, row+k, err)
	}
	return nil
}

// bytesOf views a slice of numbers as its bytes.
func bytesOf[T uint16 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// rowsFloat32 copies rows [row, row+k) of p's mapped image embeddings
// into dst [k, D] as float32 (dequantised).
func (p *indexPart) rowsFloat32(row, k int, dst []float32) {
	size := p.rowBytes()
	p.toFloat32(p.embeds[row*size:(row+k)*size], row, k, dst)
}

// toFloat32 dequantises raw, rows [row, row+k) of p's image embeddings as
// stored, into dst [k, D] float32.
func (p *indexPart) toFloat32(raw []byte, row, k int, dst []float32) {
	d := p.meta.Dim
	out := dst[:k*d]
	switch p.dtype {
	case DTypeF16:
		for i, h := range halves(raw)[:k*d] {
			out[i] = halfdot.ToFloat32(h)
		}
	case DTypeF32:
		copy(out, floats(raw)[:k*d])
	case DTypeInt8:
		src := int8s(raw)
		for j := range k {
			s := p.embScale[row+j]
			for i, v := range src[j*d : (j+1)*d] {
				out[j*d+i] = float32(v) * s
			}
		}
	}
}

// okRows sets ok[at+i] (when ok is not nil) to whether row+i of p is an
// image read and encoded.
func (p *indexPart) okRows(row, k int, ok []bool, at int) {
	if ok == nil {
		return
	}
	for i := range k {
		ok[at+i] = p.items[row+i] >= 0
	}
}

// RowItem returns row r's item (rows numbered as ReadEmbeds numbers them;
// Item.Row is its row in its part) and its part's name; false for a failed
// image's row, a row out of range or a closed index.
func (x *Index) RowItem(r int) (part string, it Item, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	x.rowsOf(r, 1, func(p *indexPart, row, _, _ int) error {
		k := p.items[row]
		if k < 0 {
			return nil
		}
		path, source, member := p.names.get(int(k))
		part, it, ok = p.name, Item{Row: row, Path: path, Source: source, Member: member, Status: statusOK}, true
		return nil
	})
	return part, it, ok
}
