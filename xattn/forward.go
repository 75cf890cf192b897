package xattn

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/conditionhq/condition/internal/xattnhooks"
	"github.com/conditionhq/condition/xattn/internal/attn"
	"github.com/conditionhq/condition/xattn/internal/gemm"
)

// AttnMode says which attention probabilities Forward returns.
type AttnMode int

// Attention outputs.
const (
	NoAttention      AttnMode = iota // none
	MeanAttention                    // averaged over heads, [T_q, T_k]
	PerHeadAttention                 // per head, [heads, T_q, T_k]
)

// Result is the output of a forward pass. Its slices are reused by the next
// Forward into the same Result (grown when needed).
type Result struct {
	TQ, TK, DOut, Heads int
	Mode                AttnMode
	// Out is the layer output [TQ, DOut].
	Out []float32
	// Attn is the attention probabilities: [TQ, TK] for MeanAttention,
	// [Heads, TQ, TK] for PerHeadAttention, nil for NoAttention. Masked keys
	// get 0; each row sums to 1 unless all its keys are masked (then 0).
	Attn []float32
}

// Source is a prepared source side: keys and values projected, masked keys
// dropped, packed per head. It belongs to the layer that made it, is
// read-only once made and may be shared by any number of workspaces.
type Source struct {
	l   *Layer
	tk  int     // keys as given
	tkc int     // keys attended (unmasked)
	idx []int32 // positions of the attended keys; nil when all are
	kp  []float32
	vp  []float32
	// scratch while preparing
	x, k, v []float32 // x: gathered (masked) or layer-normed source rows
	idxBuf  []int32
}

// TK returns the number of keys the source was prepared with (masked ones
// included).
func (s *Source) TK() int { return s.tk }

// Query is a prepared query side: queries projected (and normalised). It
// belongs to the layer that made it and is read-only once made.
type Query struct {
	l  *Layer
	tq int
	q  []float32 // [tq, inner]
	x  []float32 // scratch
}

// TQ returns the number of queries.
func (q *Query) TQ() int { return q.tq }

// Rows returns the projected queries [TQ, inner] (layer norm, W_Q, bias
// and normalisation applied). They are the query's own; do not modify.
func (q *Query) Rows() []float32 { return q.q[:q.tq*q.l.inner] }

// ErrClosed is returned by a closed Workspace.
var ErrClosed = errors.New("xattn: workspace closed")

// Workspace holds the buffers and worker goroutines of forward passes with
// one layer. After the first call of a given size, Forward allocates
// nothing. A Workspace is not safe for concurrent use; Close stops its
// workers.
type Workspace struct {
	l       *Layer
	threads int
	pool    *pool

	src Source // source of Forward and ForwardQuery
	qry Query  // queries of Forward and ForwardSource
	o   []float32
	scr []scratch

	ph    phase
	times xattnhooks.Timings // phase timings, for benchmarks (internal/xattnhooks)
}

// scratch is one worker's buffers for the attention core: the kernel's
// scores, a zero-padded last tile (queries, output, probabilities) when
// T_q is not a multiple of attn.MR, one head's probabilities for a chunk of
// rows, and the worker's part timings.
type scratch struct {
	s, qs, os, ps, prob []float32
	t                   [4]time.Duration // inputs, core, output, probs
	_                   [64]byte
}

// NewWorkspace returns a workspace running on threads goroutines (<= 0:
// runtime.GOMAXPROCS(0)).
func (l *Layer) NewWorkspace(threads int) *Workspace {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	w := &Workspace{l: l, threads: threads, pool: newPool(threads)}
	w.src.l, w.qry.l = l, l
	w.scr = make([]scratch, threads)
	w.ph.w = w
	runtime.AddCleanup(w, func(p *pool) { p.close() }, w.pool)
	return w
}

// Threads returns the number of goroutines the workspace uses.
func (w *Workspace) Threads() int { return w.threads }

// Close stops the workspace's goroutines. It is idempotent; a closed
// workspace returns ErrClosed.
func (w *Workspace) Close() error {
	w.pool.close()
	return nil
}

// Forward attends the queries q [tq, DQ] to the source kv [tk, DKV] with an
// optional key padding mask [tk] (nil: all keys) and writes the output
// [tq, DOut] and, as mode asks, the attention probabilities into res.
func (w *Workspace) Forward(res *Result, q []float32, tq int, kv []float32, tk int, mask []bool, mode AttnMode) error {
	if err := w.check(res, mode); err != nil {
		return err
	}
	if err := w.l.checkQ(q, tq); err != nil {
		return err
	}
	if err := w.l.checkKV(kv, tk, mask); err != nil {
		return err
	}
	w.prepareSource(&w.src, kv, tk, mask, false)
	w.attend(res, q, &w.qry, tq, &w.src, mode)
	return nil
}

// ForwardSource is Forward with a prepared source.
func (w *Workspace) ForwardSource(res *Result, q []float32, tq int, src *Source, mode AttnMode) error {
	if err := w.check(res, mode); err != nil {
		return err
	}
	if src == nil || src.l != w.l {
		return errors.New("xattn: source prepared by another layer")
	}
	if err := w.l.checkQ(q, tq); err != nil {
		return err
	}
	w.attend(res, q, &w.qry, tq, src, mode)
	return nil
}

// ForwardQuery is Forward with prepared queries.
func (w *Workspace) ForwardQuery(res *Result, pq *Query, kv []float32, tk int, mask []bool, mode AttnMode) error {
	if err := w.check(res, mode); err != nil {
		return err
	}
	if pq == nil || pq.l != w.l {
		return errors.New("xattn: query prepared by another layer")
	}
	if err := w.l.checkKV(kv, tk, mask); err != nil {
		return err
	}
	w.prepareSource(&w.src, kv, tk, mask, false)
	w.attend(res, nil, pq, pq.tq, &w.src, mode)
	return nil
}

// ForwardPrepared is Forward with both sides prepared.
func (w *Workspace) ForwardPrepared(res *Result, pq *Query, src *Source, mode AttnMode) error {
	if err := w.check(res, mode); err != nil {
		return err
	}
	if pq == nil || pq.l != w.l || src == nil || src.l != w.l {
		return errors.New("xattn: query or source prepared by another layer")
	}
	w.attend(res, nil, pq, pq.tq, src, mode)
	return nil
}

func (w *Workspace) check(res *Result, mode AttnMode) error {
	if w.pool.closed {
		return ErrClosed
	}
	if res == nil {
		return errors.New("xattn: nil result")
	}
	if mode < NoAttention || mode > PerHeadAttention {
		return fmt.Errorf("xattn: unknown attention mode %d", mode)
	}
	return nil
}

func (l *Layer) checkQ(q []float32, tq int) error {
	if tq < 0 || len(q) != tq*l.dq {
		return fmt.Errorf("xattn: queries have %d values, want [%d, %d] = %d: %w", len(q), tq, l.dq, tq*l.dq, ErrShape)
	}
	return nil
}

func (l *Layer) checkKV(kv []float32, tk int, mask []bool) error {
	if tk < 0 || len(kv) != tk*l.dkv {
		return fmt.Errorf("xattn: source has %d values, want [%d, %d] = %d: %w", len(kv), tk, l.dkv, tk*l.dkv, ErrShape)
	}
	return checkMask(mask, tk)
}

func checkMask(mask []bool, tk int) error {
	if mask != nil && len(mask) != tk {
		return fmt.Errorf("xattn: mask has %d values, want %d (one per key): %w", len(mask), tk, ErrShape)
	}
	return nil
}

// Forward is the allocating convenience form of Workspace.Forward on
// threads goroutines (<= 0: GOMAXPROCS).
func (l *Layer) Forward(q []float32, tq int, kv []float32, tk int, mask []bool, mode AttnMode, threads int) (*Result, error) {
	w := l.NewWorkspace(threads)
	defer w.Close()
	res := new(Result)
	if err := w.Forward(res, q, tq, kv, tk, mask, mode); err != nil {
		return nil, err
	}
	return res, nil
}

// PrepareSource projects and packs the source kv [tk, DKV] with an optional
// key padding mask [tk] once, for any number of ForwardSource calls.
func (l *Layer) PrepareSource(kv []float32, tk int, mask []bool) (*Source, error) {
	w := l.NewWorkspace(1)
	defer w.Close()
	src := new(Source)
	if err := w.PrepareSource(src, kv, tk, mask); err != nil {
		return nil, err
	}
	src.x, src.k, src.v, src.idxBuf = nil, nil, nil, nil
	return src, nil
}

// PrepareQuery projects (and normalises) the queries q [tq, DQ] once, for
// any number of ForwardQuery calls.
func (l *Layer) PrepareQuery(q []float32, tq int) (*Query, error) {
	w := l.NewWorkspace(1)
	defer w.Close()
	pq := new(Query)
	if err := w.PrepareQuery(pq, q, tq); err != nil {
		return nil, err
	}
	pq.x = nil
	return pq, nil
}

// PrepareSource is Layer.PrepareSource into dst on the workspace's
// threads, reusing dst's buffers: dst is a zero Source or one this layer
// prepared before, and no workspace may be reading it meanwhile. It is for
// a source that changes per item, such as an image's patches that several
// prompts query: after the first call of a given size it allocates
// nothing (dst keeps its scratch buffers for the next call).
func (w *Workspace) PrepareSource(dst *Source, kv []float32, tk int, mask []bool) error {
	if err := w.checkDst(dst == nil, dst.owner()); err != nil {
		return err
	}
	if err := w.l.checkKV(kv, tk, mask); err != nil {
		return err
	}
	dst.l = w.l
	w.prepareSource(dst, kv, tk, mask, false)
	return nil
}

// PrepareSourceProjected prepares dst, as PrepareSource does, from keys
// already projected: k [tk, inner] holds the rows the layer's key side
// would make of the source (layer norm, W_K, bias and normalisation
// applied), v [tk, inner] the values (nil when the layer's values are its
// keys). A query side projected by another layer with the same weights
// (Query.Rows) can so become this layer's source without projecting it
// again: CLIP's joint space projects an image's patches alike in both
// directions.
func (w *Workspace) PrepareSourceProjected(dst *Source, k, v []float32, tk int, mask []bool) error {
	if err := w.checkDst(dst == nil, dst.owner()); err != nil {
		return err
	}
	l := w.l
	if tk < 0 || len(k) != tk*l.inner {
		return fmt.Errorf("xattn: projected keys have %d values, want [%d, %d] = %d: %w", len(k), tk, l.inner, tk*l.inner, ErrShape)
	}
	switch {
	case l.vIsK && v != nil:
		return errors.New("xattn: the layer's values are its keys; pass nil values")
	case !l.vIsK && len(v) != tk*l.inner:
		return fmt.Errorf("xattn: projected values have %d values, want [%d, %d] = %d: %w", len(v), tk, l.inner, tk*l.inner, ErrShape)
	}
	if err := checkMask(mask, tk); err != nil {
		return err
	}
	dst.l = l
	w.ph.v = v
	w.prepareSource(dst, k, tk, mask, true)
	w.ph.v = nil
	return nil
}

// PrepareQuery is Layer.PrepareQuery into dst on the workspace's threads,
// reusing dst's buffers: dst is a zero Query or one this layer prepared
// before, and no workspace may be reading it meanwhile. After the first
// call of a given size it allocates nothing.
func (w *Workspace) PrepareQuery(dst *Query, q []float32, tq int) error {
	if err := w.checkDst(dst == nil, dst.owner()); err != nil {
		return err
	}
	if err := w.l.checkQ(q, tq); err != nil {
		return err
	}
	start := time.Now()
	dst.l = w.l
	w.sizeQuery(dst, tq)
	p := &w.ph
	p.kind, p.qry, p.a = phQuery, dst, q
	p.rows = w.split(tq, gemmRows, 4*gemmRows)
	w.pool.do(p.rows.n, p)
	p.qry, p.a = nil, nil
	w.times.Inputs += time.Since(start)
	return nil
}

// checkDst checks the destination of a prepare: not nil, and new or
// prepared by this workspace's layer (owner).
func (w *Workspace) checkDst(isNil bool, owner *Layer) error {
	switch {
	case w.pool.closed:
		return ErrClosed
	case isNil:
		return errors.New("xattn: nil destination")
	case owner != nil && owner != w.l:
		return errors.New("xattn: destination prepared by another layer")
	}
	return nil
}

func (s *Source) owner() *Layer {
	if s == nil {
		return nil
	}
	return s.l
}

func (q *Query) owner() *Layer {
	if q == nil {
		return nil
	}
	return q.l
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// phase is the one task type of a workspace; kind selects the work.
type phase struct {
	w    *Workspace
	kind int
	// arguments of the current phase
	rows  split     // phChunks, phQuery: query rows; phSource, phProjected: source rows (tkc), in whole key panels
	a     []float32 // phChunks: queries to project (nil: prepared); phQuery: queries; phSource: the source rows; phProjected: the keys
	v     []float32 // phProjected: the values (nil: the keys)
	src   *Source
	qry   *Query
	res   *Result
	mode  AttnMode
	probs bool // phChunks: probabilities wanted
}

// gemmRows is the row count of the projection kernels' register tiles
// (6×64 AVX-512, 6×16 AVX2); chunkAlign, a multiple of it and of attn.MR,
// is the unit of the chunks of query rows.
const (
	gemmRows   = 6
	chunkAlign = 12
)

const (
	phSource = iota
	phProjected
	phQuery
	phChunks
)

func (p *phase) run(i, wid int) {
	switch p.kind {
	case phSource:
		r0, r1 := p.rows.bounds(i)
		p.w.sourceRows(p.src, p.a, r0, r1)
	case phProjected:
		r0, r1 := p.rows.bounds(i)
		p.w.projectedRows(p.src, p.a, p.v, r0, r1)
	case phQuery:
		r0, r1 := p.rows.bounds(i)
		l := p.w.l
		l.projectRows(p.qry.q[r0*l.inner:r1*l.inner], p.a[r0*l.dq:r1*l.dq], p.qry.x, r0, r1-r0, l.dq, l.qln, l.wq, l.bq, l.normQ)
	case phChunks:
		r0, r1 := p.rows.bounds(i)
		p.w.chunk(p, r0, r1, wid)
	}
}

// split is rows cut into n pieces at multiples of align whose sizes differ
// by at most align (the last piece may be short by a partial unit).
type split struct{ rows, align, units, n int }

// bounds returns the rows [r0, r1) of piece i.
func (s split) bounds(i int) (r0, r1 int) {
	return min(s.rows, s.align*(i*s.units/s.n)), min(s.rows, s.align*((i+1)*s.units/s.n))
}

// split cuts rows into pieces for the pool, in multiples of align: one
// piece on one thread; with more threads, a multiple of the thread count
// (so that equally fast threads finish together) of pieces of about
// minRows rows or more, up to four per thread (so that a thread slowed
// down by other work on the machine holds up the phase less).
func (w *Workspace) split(rows, align, minRows int) split {
	s := split{rows: rows, align: align, units: (rows + align - 1) / align}
	switch {
	case rows == 0:
	case w.threads == 1:
		s.n = 1
	default:
		t := w.threads
		n := min(4*t, rows/minRows) / t * t
		s.n = max(1, min(s.units, max(t, n)))
	}
	return s
}

// projectRows writes y [n, inner] = f(x [n, d]) Wᵀ + b, where f is the layer
// norm ln (into scratch lnBuf rows r0.. when ln != nil), then L2-normalises
// the rows if norm. A nil W copies.
func (l *Layer) projectRows(y, x, lnBuf []float32, r0, n, d int, ln *LayerNorm, wp *gemm.Packed, b []float32, norm bool) {
	if n == 0 {
		return
	}
	if ln != nil {
		t := lnBuf[r0*d : (r0+n)*d]
		layerNorm(t, x, n, d, ln)
		x = t
	}
	if wp == nil {
		copy(y, x[:n*d])
		if b != nil {
			for i := 0; i < n; i++ {
				row := y[i*l.inner : (i+1)*l.inner]
				for j := range row {
					row[j] += b[j]
				}
			}
		}
	} else {
		gemm.MatMul(y, l.inner, x, d, n, wp, b)
	}
	if norm {
		l2normalizeRows(y, n, l.inner)
	}
}

// layerNorm writes the layer norm of the rows of x [n, d] to dst [n, d]
// (dst may be x). Each row's mean and variance are sums in float64 taken
// in index order, as layerNormGeneric takes them; four rows at a time, so
// that the four sums of a step do not wait on one another.
func layerNorm(dst, x []float32, n, d int, ln *LayerNorm) {
	i := 0
	for ; i+4 <= n; i += 4 {
		r0, r1, r2, r3 := fourRows(x, i, d)
		var s0, s1, s2, s3 float64
		for k, v := range r0 {
			s0 += float64(v)
			s1 += float64(r1[k])
			s2 += float64(r2[k])
			s3 += float64(r3[k])
		}
		m0, m1, m2, m3 := s0/float64(d), s1/float64(d), s2/float64(d), s3/float64(d)
		var q0, q1, q2, q3 float64
		for k, v := range r0 {
			t0 := float64(v) - m0
			t1 := float64(r1[k]) - m1
			t2 := float64(r2[k]) - m2
			t3 := float64(r3[k]) - m3
			q0 += t0 * t0
			q1 += t1 * t1
			q2 += t2 * t2
			q3 += t3 * t3
		}
		eps := float64(ln.Eps)
		layerNormRow(dst[i*d:(i+1)*d], r0, m0, 1/math.Sqrt(q0/float64(d)+eps), ln)
		layerNormRow(dst[(i+1)*d:(i+2)*d], r1, m1, 1/math.Sqrt(q1/float64(d)+eps), ln)
		layerNormRow(dst[(i+2)*d:(i+3)*d], r2, m2, 1/math.Sqrt(q2/float64(d)+eps), ln)
		layerNormRow(dst[(i+3)*d:(i+4)*d], r3, m3, 1/math.Sqrt(q3/float64(d)+eps), ln)
	}
	layerNormGeneric(dst[i*d:], x[i*d:], n-i, d, ln)
}

// layerNormRow writes row's normalised values, (v - mean)·inv scaled and
// shifted by ln, to out.
func layerNormRow(out, row []float32, mean, inv float64, ln *LayerNorm) {
	out = out[:len(row)]
	w := ln.Weight[:len(row)]
	if ln.Bias == nil {
		for j, v := range row {
			y := float32((float64(v) - mean) * inv)
			y *= w[j]
			out[j] = y
		}
		return
	}
	b := ln.Bias[:len(row)]
	for j, v := range row {
		y := float32((float64(v) - mean) * inv)
		y *= w[j]
		y += b[j]
		out[j] = y
	}
}

// layerNormGeneric is layerNorm one row at a time: the reference.
func layerNormGeneric(dst, x []float32, n, d int, ln *LayerNorm) {
	for i := 0; i < n; i++ {
		row := x[i*d : (i+1)*d]
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		mean := s / float64(d)
		var v2 float64
		for _, v := range row {
			t := float64(v) - mean
			v2 += t * t
		}
		inv := 1 / math.Sqrt(v2/float64(d)+float64(ln.Eps))
		out := dst[i*d : (i+1)*d]
		for j, v := range row {
			y := float32((float64(v) - mean) * inv)
			y *= ln.Weight[j]
			if ln.Bias != nil {
				y += ln.Bias[j]
			}
			out[j] = y
		}
	}
}

// fourRows returns rows i to i+3 of x [n, d], each d long (the lengths
// stated so that the compiler drops the bounds checks of a loop over r0).
func fourRows(x []float32, i, d int) (r0, r1, r2, r3 []float32) {
	r0 = x[i*d : (i+1)*d]
	return r0, x[(i+1)*d : (i+2)*d][:len(r0)], x[(i+2)*d : (i+3)*d][:len(r0)], x[(i+3)*d : (i+4)*d][:len(r0)]
}

// l2normalizeRows divides each row of x [n, d] by its Euclidean norm, as
// l2normalize does, four rows at a time (their sums of squares in index
// order, as l2normalize takes them).
func l2normalizeRows(x []float32, n, d int) {
	i := 0
	for ; i+4 <= n; i += 4 {
		r0, r1, r2, r3 := fourRows(x, i, d)
		var s0, s1, s2, s3 float64
		for k, v := range r0 {
			s0 += float64(v) * float64(v)
			s1 += float64(r1[k]) * float64(r1[k])
			s2 += float64(r2[k]) * float64(r2[k])
			s3 += float64(r3[k]) * float64(r3[k])
		}
		scaleRow(r0, float32(1/max(math.Sqrt(s0), 1e-12)))
		scaleRow(r1, float32(1/max(math.Sqrt(s1), 1e-12)))
		scaleRow(r2, float32(1/max(math.Sqrt(s2), 1e-12)))
		scaleRow(r3, float32(1/max(math.Sqrt(s3), 1e-12)))
	}
	for ; i < n; i++ {
		l2normalize(x[i*d : (i+1)*d])
	}
}

func scaleRow(x []float32, inv float32) {
	for j := range x {
		x[j] *= inv
	}
}

// l2normalize divides x by its Euclidean norm (by 1e-12 if smaller, as
// torch.nn.functional.normalize does).
func l2normalize(x []float32) {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	inv := float32(1 / max(math.Sqrt(s), 1e-12))
	for j := range x {
		x[j] *= inv
	}
}

// sizeQuery sizes pq's buffers for tq queries.
func (w *Workspace) sizeQuery(pq *Query, tq int) {
	l := w.l
	pq.tq = tq
	pq.q = grow(pq.q, tq*l.inner)
	if l.qln != nil {
		pq.x = grow(pq.x, tq*l.dq)
	}
}

// prepareSource projects and packs the source kv [tk, DKV] with its mask
// into s in one parallel phase whose items are pieces of whole key panels
// (each packs its own keys and values for every head). With projected, kv
// is the keys [tk, inner] already projected (and s.pv the values, or nil).
func (w *Workspace) prepareSource(s *Source, kv []float32, tk int, mask []bool, projected bool) {
	start := time.Now()
	w.setupSource(s, tk, mask, projected)
	p := &w.ph
	p.kind, p.src, p.a = phSource, s, kv
	if projected {
		p.kind = phProjected
	}
	p.rows = w.split(s.tkc, attn.NR, attn.NR)
	w.pool.do(p.rows.n, p)
	p.src, p.a = nil, nil
	w.times.Inputs += time.Since(start)
}

// setupSource finds the unmasked keys of a source of tk keys and sizes s's
// buffers (for keys already projected, when projected).
func (w *Workspace) setupSource(s *Source, tk int, mask []bool, projected bool) {
	l := w.l
	s.tk = tk
	all := true
	for _, m := range mask {
		if !m {
			all = false
			break
		}
	}
	if all {
		s.tkc, s.idx = tk, nil
	} else {
		s.idxBuf = s.idxBuf[:0]
		for j, m := range mask {
			if m {
				s.idxBuf = append(s.idxBuf, int32(j))
			}
		}
		s.tkc = len(s.idxBuf)
		s.idx = s.idxBuf
		if s.idx == nil {
			s.idx = []int32{}
		}
	}
	if (s.idx != nil || l.kvln != nil) && !projected {
		s.x = grow(s.x, s.tkc*l.dkv)
	}
	if s.idx != nil || !projected {
		s.k = grow(s.k, s.tkc*l.inner)
		if !l.vIsK {
			s.v = grow(s.v, s.tkc*l.inner)
		}
	}
	s.kp = grow(s.kp, l.heads*attn.PackedKLen(s.tkc, l.hd))
	s.vp = grow(s.vp, l.heads*s.tkc*attn.PadHD(l.hd))
}

// sourceRows projects the attended source rows [r0, r1) of kv [tk, DKV]
// (r0 a multiple of attn.NR; gathered past masked keys, layer-normed) to
// keys and values and packs them for every head.
func (w *Workspace) sourceRows(s *Source, kv []float32, r0, r1 int) {
	l := w.l
	n, inner, d := r1-r0, l.inner, l.dkv
	x := kv[r0*d : r1*d]
	if s.idx != nil {
		x = s.x[r0*d : r1*d]
		for i, j := range s.idx[r0:r1] {
			copy(x[i*d:(i+1)*d], kv[int(j)*d:])
		}
	}
	if l.kvln != nil {
		t := s.x[r0*d : r1*d]
		layerNorm(t, x, n, d, l.kvln)
		x = t
	}
	l.projectRows(s.k[r0*inner:r1*inner], x, nil, 0, n, d, nil, l.wk, l.bk, l.normK)
	v := s.k
	if !l.vIsK {
		l.projectRows(s.v[r0*inner:r1*inner], x, nil, 0, n, d, nil, l.wv, l.bv, false)
		v = s.v
	}
	w.packRows(s, s.k, v, r0, r1)
}

// projectedRows packs the attended rows [r0, r1) of keys already projected,
// k [tk, inner], and of the values v (nil when they are the keys), gathered
// past masked keys.
func (w *Workspace) projectedRows(s *Source, k, v []float32, r0, r1 int) {
	inner := w.l.inner
	if s.idx != nil {
		for i, j := range s.idx[r0:r1] {
			copy(s.k[(r0+i)*inner:(r0+i+1)*inner], k[int(j)*inner:])
			if v != nil {
				copy(s.v[(r0+i)*inner:(r0+i+1)*inner], v[int(j)*inner:])
			}
		}
		k = s.k
		if v != nil {
			v = s.v
		}
	}
	if v == nil {
		v = k
	}
	w.packRows(s, k, v, r0, r1)
}

// packRows packs rows [r0, r1) of the attended keys k and values v
// [tkc, inner] into s's panels for every head.
func (w *Workspace) packRows(s *Source, k, v []float32, r0, r1 int) {
	l := w.l
	n, inner, hd := r1-r0, l.inner, l.hd
	klen, hp := attn.PackedKLen(s.tkc, hd), attn.PadHD(hd)
	for h := 0; h < l.heads; h++ {
		attn.PackK(s.kp[h*klen+r0*hd:(h+1)*klen], k[r0*inner+h*hd:], inner, n, hd)
		attn.PackV(s.vp[(h*s.tkc+r0)*hp:(h+1)*s.tkc*hp], v[r0*inner+h*hd:], inner, n, hd)
	}
}

// chunkBytes is about how much of the queries and attention output of a
// chunk of rows should stay in a core's L2 cache between the fused steps.
const chunkBytes = 256 << 10

// chunks cuts tq query rows into the items of the fused pass: multiples of
// chunkAlign rows, small enough that a chunk's queries and outputs stay in
// cache from one step to the next, a multiple of the thread count of them
// (so that equally fast threads finish together) and at least two per
// thread when there are rows enough (so that a thread slowed down by other
// work on the machine holds up the pass less).
func (w *Workspace) chunks(tq int) split {
	s := split{rows: tq, align: chunkAlign, units: (tq + chunkAlign - 1) / chunkAlign}
	if tq == 0 {
		return s
	}
	target := max(2, chunkBytes/(8*w.l.inner*chunkAlign)) // units per chunk
	n := (s.units + target - 1) / target
	if t := w.threads; t > 1 {
		n = max(n, 2*t)
		n = (n + t - 1) / t * t
	}
	s.n = max(1, min(n, s.units))
	return s
}

// attend runs the fused pass over chunks of query rows: for each chunk,
// the query projection (when q, the raw queries [tq, DQ], is not nil; pq
// receives it, else pq is prepared), the attention core over all heads, the
// output projection and the probabilities.
func (w *Workspace) attend(res *Result, q []float32, pq *Query, tq int, src *Source, mode AttnMode) {
	l := w.l
	tk := src.tk
	if q != nil {
		w.sizeQuery(pq, tq)
	}
	res.TQ, res.TK, res.DOut, res.Heads, res.Mode = tq, tk, l.dout, l.heads, mode
	res.Out = grow(res.Out, tq*l.dout)
	switch mode {
	case NoAttention:
		res.Attn = nil
	case MeanAttention:
		res.Attn = grow(res.Attn, tq*tk)
	case PerHeadAttention:
		res.Attn = grow(res.Attn, l.heads*tq*tk)
	}
	if l.wo == nil {
		w.o = res.Out
	} else {
		w.o = grow(w.o, tq*l.inner)
	}
	p := &w.ph
	p.kind, p.a, p.qry, p.src, p.res, p.mode = phChunks, q, pq, src, res, mode
	p.probs = mode != NoAttention
	p.rows = w.chunks(tq)
	w.sizeScratch(src.tkc, p.rows, p.probs)
	w.times.Calls++
	w.pool.do(p.rows.n, p)
	var t [4]time.Duration
	for i := range w.scr {
		sc := &w.scr[i]
		for j := range t {
			t[j] += sc.t[j]
		}
		sc.t = [4]time.Duration{}
	}
	n := time.Duration(w.threads)
	w.times.Inputs += t[0] / n
	w.times.Core += t[1] / n
	w.times.Output += t[2] / n
	w.times.Probs += t[3] / n
	p.a, p.qry, p.src, p.res = nil, nil, nil, nil
}

// sizeScratch sizes every worker's scratch for tkc keys, the chunks rows
// and, with probs, a chunk's probabilities of one head.
func (w *Workspace) sizeScratch(tkc int, rows split, probs bool) {
	hd := w.l.hd
	maxRows := 0
	if rows.n > 0 {
		maxRows = rows.align * ((rows.units + rows.n - 1) / rows.n)
	}
	for i := range w.scr {
		sc := &w.scr[i]
		sc.s = grow(sc.s, attn.ScratchLen(max(tkc, 1), hd))
		sc.qs = grow(sc.qs, attn.MR*hd)
		sc.os = grow(sc.os, attn.MR*hd)
		sc.ps = grow(sc.ps, attn.MR*tkc)
		if probs {
			sc.prob = grow(sc.prob, maxRows*tkc)
		}
	}
}

// chunk runs the fused steps for query rows [r0, r1) on worker wid.
func (w *Workspace) chunk(p *phase, r0, r1, wid int) {
	l := w.l
	sc := &w.scr[wid]
	res, src, pq := p.res, p.src, p.qry
	t0 := time.Now()
	if p.a != nil {
		l.projectRows(pq.q[r0*l.inner:r1*l.inner], p.a[r0*l.dq:r1*l.dq], pq.x, r0, r1-r0, l.dq, l.qln, l.wq, l.bq, l.normQ)
	}
	t1 := time.Now()
	sc.t[0] += t1.Sub(t0)
	var tp time.Duration
	// Per-head probabilities with no masked key go straight into res.Attn.
	direct := p.mode == PerHeadAttention && src.idx == nil
	for h := 0; h < l.heads; h++ {
		switch {
		case !p.probs:
			w.coreRows(h, r0, r1, sc, pq, src, nil, 0)
		case direct:
			w.coreRows(h, r0, r1, sc, pq, src, res.Attn[(h*res.TQ+r0)*res.TK:], res.TK)
		default:
			w.coreRows(h, r0, r1, sc, pq, src, sc.prob, src.tkc)
			t := time.Now()
			w.chunkProbs(res, src, h, r0, r1, sc.prob)
			tp += time.Since(t)
		}
	}
	t2 := time.Now()
	sc.t[1] += t2.Sub(t1) - tp
	sc.t[3] += tp
	if l.wo != nil {
		gemm.MatMul(res.Out[r0*l.dout:r1*l.dout], l.dout, w.o[r0*l.inner:r1*l.inner], l.inner, r1-r0, l.wo, l.bo)
		sc.t[2] += time.Since(t2)
	}
}

// coreRows computes head h of query rows [r0, r1) (r0 a multiple of
// attn.MR): the attention output into w.o[rows, h*hd:(h+1)*hd] and, if prob
// is not nil, the probabilities into prob [r1-r0, tkc] (row stride ldp).
// Whole tiles run in one kernel call; a last, partial tile runs through
// zero-padded scratch.
func (w *Workspace) coreRows(h, r0, r1 int, sc *scratch, pq *Query, src *Source, prob []float32, ldp int) {
	l := w.l
	hd, inner := l.hd, l.inner
	tkc := src.tkc
	if tkc == 0 {
		for i := r0; i < r1; i++ {
			clear(w.o[i*inner+h*hd : i*inner+(h+1)*hd])
		}
		return
	}
	klen := attn.PackedKLen(tkc, hd)
	kp := src.kp[h*klen : (h+1)*klen]
	vp := src.vp[h*tkc*attn.PadHD(hd) : (h+1)*tkc*attn.PadHD(hd)]
	first := r0
	if full := (r1 - r0) / attn.MR; full > 0 {
		attn.Attend(w.o[r0*inner+h*hd:], inner, pq.q[r0*inner+h*hd:], inner, full, kp, vp, tkc, hd, l.scale, sc.s, prob, ldp)
		r0 += full * attn.MR
	}
	if r0 == r1 {
		return
	}
	n := r1 - r0
	for i := 0; i < n; i++ {
		copy(sc.qs[i*hd:(i+1)*hd], pq.q[(r0+i)*inner+h*hd:])
	}
	clear(sc.qs[n*hd:])
	var ps []float32
	if prob != nil {
		ps = sc.ps
	}
	attn.Attend(sc.os, hd, sc.qs, hd, 1, kp, vp, tkc, hd, l.scale, sc.s, ps, tkc)
	for i := 0; i < n; i++ {
		copy(w.o[(r0+i)*inner+h*hd:(r0+i)*inner+(h+1)*hd], sc.os[i*hd:])
		if prob != nil {
			copy(prob[(r0-first+i)*ldp:(r0-first+i)*ldp+tkc], ps[i*tkc:])
		}
	}
}

// chunkProbs adds head h's probabilities of rows [r0, r1), p [r1-r0, tkc],
// to res.Attn: into the head average (divided by the head count after the
// last head) or its own rows, scattered to the unmasked key positions.
func (w *Workspace) chunkProbs(res *Result, src *Source, h, r0, r1 int, p []float32) {
	heads, tq, tk, tkc := w.l.heads, res.TQ, res.TK, src.tkc
	if res.Mode == PerHeadAttention {
		for i := r0; i < r1; i++ {
			scatter(res.Attn[(h*tq+i)*tk:(h*tq+i+1)*tk], p[(i-r0)*tkc:(i-r0+1)*tkc], src.idx)
		}
		return
	}
	for i := r0; i < r1; i++ {
		dst := res.Attn[i*tk : (i+1)*tk]
		pr := p[(i-r0)*tkc : (i-r0+1)*tkc]
		switch {
		case h == 0 && src.idx == nil:
			copy(dst, pr)
		case src.idx == nil:
			for j, v := range pr {
				dst[j] += v
			}
		default:
			if h == 0 {
				clear(dst)
			}
			for j, v := range pr {
				dst[src.idx[j]] += v
			}
		}
		if h == heads-1 {
			inv := 1 / float32(heads)
			for j := range dst {
				dst[j] *= inv
			}
		}
	}
}

func scatter(dst, p []float32, idx []int32) {
	if idx == nil {
		copy(dst, p)
		return
	}
	clear(dst)
	for j, v := range p {
		dst[idx[j]] = v
	}
}
