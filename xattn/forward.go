package xattn

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

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
	x, k, v []float32
	in      []float32 // the rows to project: x, or the caller's kv
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

	src  Source // source of Forward and ForwardQuery
	qry  Query  // queries of Forward and ForwardSource
	o    []float32
	prob []float32 // [heads, tq, tkc]
	scr  []scratch

	ph    phase
	times Timings
}

// Timings are the wall-clock durations of the phases of a workspace's
// forward passes, summed over Calls passes since the last ResetTimings.
// Projections are Inputs + Output.
type Timings struct {
	Calls int
	// Inputs is the projection of the sides that were not prepared: the
	// queries (with layer norm and normalisation) and the keys and values
	// (with packing), run together.
	Inputs time.Duration
	// Core is the attention core (scores, softmax, P·V over all heads).
	Core time.Duration
	// Output is the output projection; Probs the attention maps returned
	// (head average or per-head copy).
	Output, Probs time.Duration
}

// Timings returns the phase durations summed since the last ResetTimings.
func (w *Workspace) Timings() Timings { return w.times }

// ResetTimings sets the phase durations to zero.
func (w *Workspace) ResetTimings() { w.times = Timings{} }

// scratch is one worker's buffers for the attention core: the kernel's
// scores, and a zero-padded last tile (queries, output, probabilities) when
// T_q is not a multiple of attn.MR.
type scratch struct {
	s, qs, os, ps []float32
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
	w.prepare(&w.qry, q, tq, &w.src, kv, tk, mask)
	w.attend(res, &w.qry, &w.src, mode)
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
	w.prepare(&w.qry, q, tq, nil, nil, 0, nil)
	w.attend(res, &w.qry, src, mode)
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
	w.prepare(nil, nil, 0, &w.src, kv, tk, mask)
	w.attend(res, pq, &w.src, mode)
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
	w.attend(res, pq, src, mode)
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
	if err := l.checkKV(kv, tk, mask); err != nil {
		return nil, err
	}
	w := l.NewWorkspace(1)
	defer w.Close()
	src := &Source{l: l}
	w.prepare(nil, nil, 0, src, kv, tk, mask)
	src.x, src.k, src.v, src.idxBuf = nil, nil, nil, nil
	return src, nil
}

// PrepareQuery projects (and normalises) the queries q [tq, DQ] once, for
// any number of ForwardQuery calls.
func (l *Layer) PrepareQuery(q []float32, tq int) (*Query, error) {
	if err := l.checkQ(q, tq); err != nil {
		return nil, err
	}
	w := l.NewWorkspace(1)
	defer w.Close()
	pq := &Query{l: l}
	w.prepare(pq, q, tq, nil, nil, 0, nil)
	pq.x = nil
	return pq, nil
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
	rows      split     // query rows (phInputs, phOut, phProbs)
	kvRows    split     // phInputs: source rows (tkc), in whole key panels
	kvFirst   bool      // phInputs: source pieces are items [0, kvRows.n), else after the query pieces
	a, c      []float32 // input rows, output rows
	ln        *LayerNorm
	lda, d    int
	src       *Source
	qry       *Query
	res       *Result
	mode      AttnMode
	tiles     int // query tiles of attn.MR rows
	perHead   int // core items per head
	tileChunk int // tiles per core item
}

// gemmRows is the row count of the projection kernels' register tiles
// (6×64 AVX-512, 6×16 AVX2): pieces of the projections are multiples of it.
// minGemmRows is the smallest piece worth an item of its own.
const (
	gemmRows    = 6
	minGemmRows = 24
)

const (
	phInputs = iota
	phCore
	phOut
	phProbs
)

func (p *phase) run(i, wid int) {
	w := p.w
	l := w.l
	switch p.kind {
	case phInputs:
		kv := i - p.rows.n
		if p.kvFirst {
			kv = i
			i -= p.kvRows.n
		}
		if kv >= 0 && kv < p.kvRows.n {
			r0, r1 := p.kvRows.bounds(kv)
			w.sourceRows(p.src, r0, r1)
			return
		}
		r0, r1 := p.rows.bounds(i)
		l.projectRows(p.qry.q[r0*l.inner:r1*l.inner], p.a[r0*l.dq:r1*l.dq], p.qry.x, r0, r1-r0, l.dq, l.qln, l.wq, l.bq, l.normQ)
	case phCore:
		h, c := i/p.perHead, i%p.perHead
		t0 := c * p.tileChunk
		w.coreTiles(h, t0, min(t0+p.tileChunk, p.tiles), wid, p.qry, p.src, p.mode != NoAttention)
	case phOut:
		r0, r1 := p.rows.bounds(i)
		gemm.MatMul(p.res.Out[r0*l.dout:r1*l.dout], l.dout, w.o[r0*l.inner:r1*l.inner], l.inner, r1-r0, l.wo, l.bo)
	case phProbs:
		r0, r1 := p.rows.bounds(i)
		w.finishProbs(p.res, p.src, r0, r1)
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
		for i := 0; i < n; i++ {
			l2normalize(y[i*l.inner : (i+1)*l.inner])
		}
	}
}

func layerNorm(dst, x []float32, n, d int, ln *LayerNorm) {
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

// prepare projects the queries q [tq, DQ] into pq (if pq != nil) and the
// source kv [tk, DKV] with its mask into s (if s != nil), in one parallel
// phase: query row chunks and source row chunks (each packing its own
// keys and values for every head) are the items.
func (w *Workspace) prepare(pq *Query, q []float32, tq int, s *Source, kv []float32, tk int, mask []bool) {
	start := time.Now()
	l := w.l
	p := &w.ph
	p.kind = phInputs
	p.rows, p.kvRows = split{}, split{}
	if pq != nil {
		pq.tq = tq
		pq.q = grow(pq.q, tq*l.inner)
		if l.qln != nil {
			pq.x = grow(pq.x, tq*l.dq)
		}
		p.qry, p.a = pq, q
		p.rows = w.split(tq, gemmRows, minGemmRows)
	}
	if s != nil {
		w.setupSource(s, kv, tk, mask)
		p.src = s
		// Pieces of whole key panels, so that each packs its own.
		p.kvRows = w.split(s.tkc, attn.NR, attn.NR)
	}
	// Larger items first, so that the last ones, which decide how evenly
	// the threads finish, are the small ones.
	p.kvFirst = false
	if p.kvRows.n > 0 && p.rows.n > 0 {
		kvCost := (l.dkv * l.inner * 2) * ((p.kvRows.rows + p.kvRows.n - 1) / p.kvRows.n)
		qCost := (l.dq * l.inner) * ((p.rows.rows + p.rows.n - 1) / p.rows.n)
		p.kvFirst = kvCost > qCost
	}
	w.pool.do(p.rows.n+p.kvRows.n, p)
	p.qry, p.a, p.src = nil, nil, nil
	if s != nil {
		s.in = nil
	}
	w.times.Inputs += time.Since(start)
}

// setupSource drops the masked keys of kv [tk, DKV] into s's input rows and
// sizes s's buffers.
func (w *Workspace) setupSource(s *Source, kv []float32, tk int, mask []bool) {
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
		if l.kvln == nil {
			s.in = kv
		} else {
			s.x = grow(s.x, tk*l.dkv)
			copy(s.x, kv)
			s.in = s.x
		}
	} else {
		s.x = grow(s.x, tk*l.dkv)
		s.idxBuf = s.idxBuf[:0]
		for j, m := range mask {
			if m {
				n := len(s.idxBuf)
				copy(s.x[n*l.dkv:(n+1)*l.dkv], kv[j*l.dkv:(j+1)*l.dkv])
				s.idxBuf = append(s.idxBuf, int32(j))
			}
		}
		s.tkc = len(s.idxBuf)
		s.idx = s.idxBuf
		if s.idx == nil {
			s.idx = []int32{}
		}
		s.in = s.x
	}
	s.k = grow(s.k, s.tkc*l.inner)
	if !l.vIsK {
		s.v = grow(s.v, s.tkc*l.inner)
	}
	s.kp = grow(s.kp, l.heads*attn.PackedKLen(s.tkc, l.hd))
	s.vp = grow(s.vp, l.heads*s.tkc*attn.PadHD(l.hd))
}

// sourceRows projects the source rows [r0, r1) (r0 a multiple of attn.NR)
// to keys and values and packs them for every head.
func (w *Workspace) sourceRows(s *Source, r0, r1 int) {
	l := w.l
	n, inner, hd := r1-r0, l.inner, l.hd
	x := s.in[r0*l.dkv : r1*l.dkv]
	if l.kvln != nil {
		layerNorm(x, x, n, l.dkv, l.kvln)
	}
	l.projectRows(s.k[r0*inner:r1*inner], x, nil, 0, n, l.dkv, nil, l.wk, l.bk, l.normK)
	v := s.k
	if !l.vIsK {
		l.projectRows(s.v[r0*inner:r1*inner], x, nil, 0, n, l.dkv, nil, l.wv, l.bv, false)
		v = s.v
	}
	klen, hp := attn.PackedKLen(s.tkc, hd), attn.PadHD(hd)
	for h := 0; h < l.heads; h++ {
		attn.PackK(s.kp[h*klen+r0*hd:(h+1)*klen], s.k[r0*inner+h*hd:], inner, n, hd)
		attn.PackV(s.vp[(h*s.tkc+r0)*hp:(h+1)*s.tkc*hp], v[r0*inner+h*hd:], inner, n, hd)
	}
}

// attend runs the attention core over all heads and query tiles, the output
// projection and the probabilities.
func (w *Workspace) attend(res *Result, pq *Query, src *Source, mode AttnMode) {
	l := w.l
	tq, tk := pq.tq, src.tk
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
	if mode != NoAttention {
		w.prob = grow(w.prob, l.heads*tq*src.tkc)
	}
	w.sizeScratch(src.tkc)

	w.times.Calls++
	start := time.Now()
	p := &w.ph
	p.kind, p.qry, p.src, p.res, p.mode = phCore, pq, src, res, mode
	p.tiles = (tq + attn.MR - 1) / attn.MR
	// Items are heads × chunks of tiles, chunks innermost, so that a
	// goroutine's consecutive items use one head's keys and values (in L1
	// for the kernel's passes). One item per head on one thread (one
	// kernel call per head); with more threads, enough items for about
	// four per thread. (Heads innermost, reusing query rows across heads,
	// measured no faster.)
	p.perHead = 1
	if w.threads > 1 {
		p.perHead = min(p.tiles, max(1, (4*w.threads+l.heads-1)/l.heads))
	}
	p.tileChunk = (p.tiles + p.perHead - 1) / p.perHead
	p.perHead = (p.tiles + p.tileChunk - 1) / p.tileChunk
	w.pool.do(l.heads*p.perHead, p)
	t := time.Now()
	w.times.Core += t.Sub(start)
	p.rows = w.split(tq, gemmRows, minGemmRows)
	if l.wo != nil {
		p.kind = phOut
		w.pool.do(p.rows.n, p)
		t1 := time.Now()
		w.times.Output += t1.Sub(t)
		t = t1
	}
	if mode != NoAttention {
		p.kind = phProbs
		w.pool.do(p.rows.n, p)
		w.times.Probs += time.Since(t)
	}
	p.qry, p.src, p.res = nil, nil, nil
}

func (w *Workspace) sizeScratch(tkc int) {
	hd := w.l.hd
	for i := range w.scr {
		sc := &w.scr[i]
		sc.s = grow(sc.s, attn.ScratchLen(max(tkc, 1)))
		sc.qs = grow(sc.qs, attn.MR*hd)
		sc.os = grow(sc.os, attn.MR*hd)
		sc.ps = grow(sc.ps, attn.MR*tkc)
	}
}

// coreTiles computes head h of query tiles [t0, t1): the attention output
// into w.o[rows, h*hd:(h+1)*hd] and, if probs, the probabilities into
// w.prob [heads, tq, tkc]. Whole tiles run in one kernel call; a last,
// partial tile runs through zero-padded scratch.
func (w *Workspace) coreTiles(h, t0, t1, wid int, pq *Query, src *Source, probs bool) {
	l := w.l
	sc := &w.scr[wid]
	hd, inner := l.hd, l.inner
	tq, tkc := pq.tq, src.tkc
	r0, r1 := t0*attn.MR, min(t1*attn.MR, tq)
	if tkc == 0 {
		for i := r0; i < r1; i++ {
			clear(w.o[i*inner+h*hd : i*inner+(h+1)*hd])
		}
		return
	}
	klen := attn.PackedKLen(tkc, hd)
	kp := src.kp[h*klen : (h+1)*klen]
	vp := src.vp[h*tkc*attn.PadHD(hd) : (h+1)*tkc*attn.PadHD(hd)]
	var prob []float32
	if probs {
		prob = w.prob[h*tq*tkc : (h+1)*tq*tkc]
	}
	if full := (r1 - r0) / attn.MR; full > 0 {
		var p []float32
		if probs {
			p = prob[r0*tkc:]
		}
		attn.Attend(w.o[r0*inner+h*hd:], inner, pq.q[r0*inner+h*hd:], inner, full, kp, vp, tkc, hd, l.scale, sc.s, p, tkc)
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
	var p []float32
	if probs {
		p = sc.ps
	}
	attn.Attend(sc.os, hd, sc.qs, hd, 1, kp, vp, tkc, hd, l.scale, sc.s, p, tkc)
	for i := 0; i < n; i++ {
		copy(w.o[(r0+i)*inner+h*hd:(r0+i)*inner+(h+1)*hd], sc.os[i*hd:])
		if probs {
			copy(prob[(r0+i)*tkc:(r0+i+1)*tkc], sc.ps[i*tkc:])
		}
	}
}

// finishProbs writes rows r0..r1 of res.Attn from w.prob [heads, tq, tkc]:
// averaged over heads or per head, scattered to the unmasked key positions.
func (w *Workspace) finishProbs(res *Result, src *Source, r0, r1 int) {
	heads, tq, tk, tkc := w.l.heads, res.TQ, res.TK, src.tkc
	if res.Mode == PerHeadAttention {
		for h := 0; h < heads; h++ {
			for i := r0; i < r1; i++ {
				dst := res.Attn[(h*tq+i)*tk : (h*tq+i+1)*tk]
				p := w.prob[(h*tq+i)*tkc : (h*tq+i+1)*tkc]
				scatter(dst, p, src.idx)
			}
		}
		return
	}
	inv := 1 / float32(heads)
	for i := r0; i < r1; i++ {
		dst := res.Attn[i*tk : (i+1)*tk]
		clear(dst)
		for h := 0; h < heads; h++ {
			p := w.prob[(h*tq+i)*tkc : (h*tq+i+1)*tkc]
			if src.idx == nil {
				for j, v := range p {
					dst[j] += v
				}
			} else {
				for j, v := range p {
					dst[src.idx[j]] += v
				}
			}
		}
		for j := range dst {
			dst[j] *= inv
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
