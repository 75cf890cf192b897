package index

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
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
func (x *Index) ReadEmbeds(r0 int, dst []float32, ok []bool) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	d := x.meta.Dim
	return x.rowsOf(r0, len(dst)/max(d, 1), func(p *indexPart, row, k, at int) error {
		p.rowsFloat32(row, k, dst[at*d:(at+k)*d])
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
		copy(dst[at*d:(at+k)*d], halves(p.embeds)[row*d:(row+k)*d])
		p.okRows(row, k, ok, at)
		return nil
	})
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

// DropResident says that rows r0 … r0+n-1 of the stored image embeddings
// will not be read again soon: the whole pages of the mapped files that hold
// them leave this process's resident memory (they stay in the system's page
// cache, and a later read maps them back in without reading the disk). A
// reader that copies every row once, as dedup's clustered search does,
// then holds its copy, not its copy and the mapping. Errors are of the
// range only; the advice itself is best effort.
func (x *Index) DropResident(r0, n int) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	page := os.Getpagesize()
	return x.rowsOf(r0, n, func(p *indexPart, row, k, _ int) error {
		if len(p.embeds) == 0 {
			return nil
		}
		size := len(p.embeds) / p.meta.Rows // bytes per row
		b := p.embeds[row*size : (row+k)*size]
		// Whole pages only: the pages at the ends hold other rows too.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		lo := (start + uintptr(page) - 1) &^ uintptr(page-1)
		hi := (start + uintptr(len(b))) &^ uintptr(page-1)
		if hi <= lo {
			return nil
		}
		unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
		return nil
	})
}
