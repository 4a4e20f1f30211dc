package surf

import (
	"context"
	"fmt"
	"io"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// Bounds of the lazy surface (SPECS.md §14.11). They change no byte of any
// output, result or trace; only what is held in memory and how artifacts
// reach the store.
const (
	// smallValue: an input, params or memoized node output of at most this
	// many bytes is kept in memory when it is read for verification; a
	// larger one is read from the store each time its bytes are used.
	smallValue = 1 << 20
	// smallValuesTotal bounds the bytes of small values one run keeps.
	smallValuesTotal = 16 << 20
	// inBatch: outputs totalling at most this many bytes are stored in the
	// batch with the result and trace; larger ones are streamed into the
	// store first, one durable put each.
	inBatch = 16 << 20
)

// Progress reports a surface run as it goes (Options.Progress).
type Progress struct {
	// NodesDone counts the nodes evaluated so far, of NodesTotal (0 when
	// the program does not decode).
	NodesDone, NodesTotal int
	// BytesWritten counts the output bytes streamed into the store so far,
	// of BytesTotal (both 0 when the outputs go into the final batch).
	BytesWritten, BytesTotal uint64
}

// loader reads the values of one run: each is verified whole once (the
// store's digest check) before the run uses it; a small one is kept in
// memory, a larger one becomes a store-backed rope.
type loader struct {
	store asl.Fetcher
	kept  uint64 // bytes of small values kept
	buf   []byte
}

func (l *loader) load(ctx context.Context, ref asl.Reference) (*asl.Rope, error) {
	rc, hdr, err := l.store.Fetch(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if hdr.Size <= smallValue && l.kept+hdr.Size <= smallValuesTotal {
		b, err := asl.ReadWhole(rc, hdr.Size)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", ref, err)
		}
		l.kept += hdr.Size
		return asl.NewRope(asl.Artifact{Bytes: b, Tag: hdr.Tag, HasTag: hdr.HasTag}), nil
	}
	if l.buf == nil {
		l.buf = make([]byte, 256<<10)
	}
	// The verifying reader ends with io.EOF only when the digest matched.
	if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, rc, l.buf); err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	if err := asl.ExpectEnd(rc); err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	return asl.StoredRope(l.store, ref, hdr), nil
}

// runObserver feeds the trace builder with output references derived by
// streaming each node's outputs, and reports progress. A failed read is
// kept in err; the run's Interrupt then stops the evaluation.
type runObserver struct {
	ctx      context.Context
	b        *trace.Stream
	err      error
	progress func(Progress)
	p        Progress
}

func (o *runObserver) ObserveNode(ev pel.NodeEvent) {
	var refs []asl.Reference
	for i, v := range ev.Values {
		if o.err != nil {
			break
		}
		ref, err := v.Ref(o.ctx, o.b.Hash())
		if err != nil {
			o.err = fmt.Errorf("node %d output %d: %w", ev.NodeID, i, err)
		}
		refs = append(refs, ref)
	}
	o.b.ObserveRefs(ev, refs)
	o.p.NodesDone++
	if o.progress != nil {
		o.progress(o.p)
	}
}

// interrupt stops the evaluation on a failed read or a cancelled context.
func (o *runObserver) interrupt() error {
	if o.err != nil {
		return o.err
	}
	return o.ctx.Err()
}

// smallOutputs reads outs into memory when they total at most inBatch
// bytes; ok is false when they are to be streamed.
func smallOutputs(ctx context.Context, outs []*asl.Rope) (arts []asl.Artifact, ok bool, err error) {
	var total uint64
	for _, o := range outs {
		if total += o.Size(); total > inBatch || total < o.Size() {
			return nil, false, nil
		}
	}
	arts = make([]asl.Artifact, len(outs))
	for i, o := range outs {
		if arts[i], err = o.Artifact(ctx, inBatch); err != nil {
			return nil, false, err
		}
	}
	return arts, true, nil
}

// streamOutputs puts each of outs into the store, streaming its bytes, and
// checks that the store derived refs[i], reporting progress to report
// (may be nil). Each put is durable when it returns.
func (s *Surface) streamOutputs(ctx context.Context, outs []*asl.Rope, refs []asl.Reference, p *Progress, report func(Progress)) error {
	for _, o := range outs {
		p.BytesTotal += o.Size()
	}
	for i, o := range outs {
		rc := o.Open(ctx)
		ref, err := s.store.Put(ctx, s.opts.Hash, o.Header(), &progressReader{r: rc, p: p, fn: report})
		if err == nil {
			// A store may stop reading at the header's size: reading on
			// to the rope's end completes its last whole-digest check.
			err = asl.ExpectEnd(rc)
		}
		rc.Close()
		if err != nil {
			return fmt.Errorf("surface run: storing output %d: %w", i, err)
		}
		if ref != refs[i] {
			return fmt.Errorf("surface run: store returned %s for output %d, derived %s: %w", ref, i, refs[i], asl.ErrIntegrity)
		}
	}
	return nil
}

// progressReader counts the bytes read through it into p.BytesWritten and
// reports every 4 MiB.
type progressReader struct {
	r    io.Reader
	p    *Progress
	fn   func(Progress)
	last uint64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.p.BytesWritten += uint64(n)
	if pr.fn != nil && (pr.p.BytesWritten-pr.last >= 4<<20 || pr.p.BytesWritten == pr.p.BytesTotal) {
		pr.last = pr.p.BytesWritten
		pr.fn(*pr.p)
	}
	return n, err
}
