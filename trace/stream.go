package trace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
)

// Stream is a Builder for runs of any size (SPECS.md §14.11): it encodes
// each node record as the node is observed and appends it to a spool, in
// memory while the records total at most Options.MemoryBytes and in a
// temporary file beyond, instead of holding a NodeRecord per node. Finish
// writes the header (whose exec_result_ref and node_count are known only at
// the end) and derives the reference of the whole TraceBytes: header and
// records are encoded by the same functions as Append, so the bytes and the
// reference are those of Append over the same records. A Stream is for one
// run and one goroutine.
type Stream struct {
	hash  asl.HashID
	opts  StreamOptions
	count uint64
	last  NodeRecord // the last record observed, checked by Finish
	// lastRefs backs last.OutputRefs; hold copies them.
	lastRefs []asl.Reference
	err      error

	held []NodeRecord // the records as values, while count <= opts.HoldRecords
	refs []asl.Reference

	buf  []byte   // encoded records not yet in file
	file *os.File // nil while the records fit opts.MemoryBytes
	size int64    // encoded record bytes in file
}

// StreamOptions bound what a Stream keeps in memory.
type StreamOptions struct {
	// MemoryBytes is how many encoded record bytes stay in memory before
	// the spool moves to a temporary file; zero means 8 MiB.
	MemoryBytes int
	// HoldRecords is how many records are also kept as NodeRecord values,
	// so that Spooled.Trace is the whole trace; a run with more has only
	// the header fields in Spooled.Trace. Zero means 65,536.
	HoldRecords int
	// Dir is the directory of the temporary file; empty means os.TempDir().
	Dir string
}

const (
	defaultSpoolMemory = 8 << 20
	defaultHoldRecords = 1 << 16
	spoolFlush         = 256 << 10 // buffered bytes written to the file at once
)

var _ pel.Observer = (*Stream)(nil)

// NewStream returns a Stream deriving output references with hash, which
// must be registered.
func NewStream(hash asl.HashID, opts StreamOptions) (*Stream, error) {
	if _, ok := asl.LookupHash(hash); !ok {
		return nil, fmt.Errorf("trace stream: hash id 0x%04x: %w", uint16(hash), asl.ErrUnsupported)
	}
	if opts.MemoryBytes <= 0 {
		opts.MemoryBytes = defaultSpoolMemory
	}
	if opts.HoldRecords <= 0 {
		opts.HoldRecords = defaultHoldRecords
	}
	return &Stream{hash: hash, opts: opts}, nil
}

// Hash is the hash id the Stream derives output references with.
func (s *Stream) Hash() asl.HashID { return s.hash }

// ObserveNode is Builder.ObserveNode.
func (s *Stream) ObserveNode(ev pel.NodeEvent) {
	var refs []asl.Reference
	switch {
	case len(ev.Outputs) > 0:
		refs = make([]asl.Reference, len(ev.Outputs))
		for i, out := range ev.Outputs {
			refs[i] = asl.MustDerive(s.hash, out)
		}
	case len(ev.Values) > 0:
		refs = make([]asl.Reference, len(ev.Values))
		for i, v := range ev.Values {
			ref, err := v.Ref(context.Background(), s.hash)
			if err != nil {
				panic(fmt.Sprintf("trace stream: node %d output %d: %v (use ObserveRefs)", ev.NodeID, i, err))
			}
			refs[i] = ref
		}
	}
	s.ObserveRefs(ev, refs)
}

// ObserveRefs records one node event whose output references the caller
// derived (under the Stream's hash) as refs, which the Stream does not
// keep. An invalid sequence of records (a record after a failed one) or a
// failure to write the spool is reported by Finish.
func (s *Stream) ObserveRefs(ev pel.NodeEvent, refs []asl.Reference) {
	if s.err != nil {
		return
	}
	if s.count > 0 {
		if err := checkRecord(&s.last, false); err != nil {
			s.err = fmt.Errorf("trace: %w", err)
			return
		}
	}
	rec := NodeRecord{NodeID: ev.NodeID, Op: ev.Op, Status: ev.Status, StatusCode: ev.StatusCode,
		Diagnostics: slices.Clone(ev.Diagnostics), OutputRefs: refs}
	s.buf = appendRecord(s.buf, &rec)
	s.count++
	s.lastRefs = append(s.lastRefs[:0], refs...)
	rec.OutputRefs = s.lastRefs[:len(refs):len(refs)]
	s.last = rec
	if s.held != nil || s.count == 1 {
		s.hold(rec)
	}
	if s.file == nil && len(s.buf) > s.opts.MemoryBytes {
		f, err := os.CreateTemp(s.opts.Dir, "amduat-trace-*")
		if err != nil {
			s.err = fmt.Errorf("trace stream: spool: %w", err)
			return
		}
		s.file = f
	}
	if s.file != nil && len(s.buf) >= spoolFlush {
		s.flush()
	}
}

// hold keeps rec as a value while the run has at most HoldRecords records.
func (s *Stream) hold(rec NodeRecord) {
	if s.count > uint64(s.opts.HoldRecords) {
		s.held, s.refs = nil, nil
		return
	}
	if n := len(rec.OutputRefs); n > 0 {
		if cap(s.refs)-len(s.refs) < n {
			s.refs = make([]asl.Reference, 0, max(refsChunk, n))
		}
		at := len(s.refs)
		s.refs = append(s.refs, rec.OutputRefs...)
		rec.OutputRefs = s.refs[at:len(s.refs):len(s.refs)]
	}
	s.held = append(s.held, rec)
}

func (s *Stream) flush() {
	if _, err := s.file.Write(s.buf); err != nil {
		s.err = fmt.Errorf("trace stream: spool: %w", err)
		return
	}
	s.size += int64(len(s.buf))
	s.buf = s.buf[:0]
}

// Close removes the spool of a Stream that Finish was not called on.
func (s *Stream) Close() error {
	if s.file == nil {
		return nil
	}
	f := s.file
	s.file = nil
	return removeSpool(f)
}

func removeSpool(f *os.File) error {
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// Finish ends the Stream: it checks the records observed against res and
// the links as Builder.Finish does, and returns the TraceBytes with their
// reference. The Stream's spool passes to the Spooled, which the caller
// closes.
func (s *Stream) Finish(l Links, res pel.ExecutionResultValue) (*Spooled, error) {
	fail := func(err error) (*Spooled, error) {
		s.Close()
		return nil, err
	}
	if s.err != nil {
		return fail(s.err)
	}
	if s.count > math.MaxUint32 {
		return fail(fmt.Errorf("trace: %d node records, more than node_count can hold", s.count))
	}
	t := Trace{
		SchemeRef:     res.SchemeRef,
		ProgramRef:    l.ProgramRef,
		InputRefs:     slices.Clone(l.InputRefs),
		ParamsRef:     l.ParamsRef,
		HasParams:     l.HasParams,
		ExecResultRef: l.ExecResultRef,
		Status:        res.Status,
		StatusCode:    res.Summary.StatusCode,
	}
	if !l.HasParams {
		t.ParamsRef = asl.Reference{}
	}
	// The last record with the header: Validate checks it as the last one
	// and against the overall status; the others were checked as they came.
	if s.count > 0 {
		t.Nodes = []NodeRecord{s.last}
	}
	if err := t.Validate(); err != nil {
		return fail(err)
	}
	t.Nodes = s.held
	sp := &Spooled{hash: s.hash, header: appendHeader(nil, &t, uint32(s.count)), Count: s.count}
	if s.held != nil && uint64(len(s.held)) == s.count {
		sp.Trace, sp.Held = t, true
	} else {
		t.Nodes = nil
		sp.Trace = t
	}
	if s.file != nil {
		if s.flush(); s.err != nil {
			return fail(s.err)
		}
		sp.file, sp.size = s.file, s.size
		s.file = nil
	} else {
		sp.mem = s.buf
	}
	s.buf, s.held, s.refs = nil, nil, nil
	h, err := asl.NewHasher(s.hash, sp.Header())
	if err == nil {
		_, err = io.Copy(h, sp.Open())
	}
	if err == nil {
		sp.Ref, err = h.Sum()
	}
	if err != nil {
		sp.Close()
		return nil, fmt.Errorf("trace stream: hashing the spool: %w", err)
	}
	return sp, nil
}

// Spooled is the TraceBytes of a finished Stream: the header in memory and
// the records in memory or in a temporary file, removed by Close.
type Spooled struct {
	// Ref is the reference of the trace artifact (TraceBytes tagged
	// TYPE_TAG_PEL_TRACE_DAG_1) under the Stream's hash.
	Ref asl.Reference
	// Count is the number of node records.
	Count uint64
	// Trace holds the trace's header fields, and its records when Held.
	Trace Trace
	// Held is true when Trace.Nodes are all the records.
	Held bool

	hash   asl.HashID
	header []byte
	mem    []byte
	file   *os.File
	size   int64
}

// InMemory reports whether the records are in memory (no temporary file).
func (sp *Spooled) InMemory() bool { return sp.file == nil }

// Header is the header of the trace artifact.
func (sp *Spooled) Header() asl.Header {
	n := int64(len(sp.header)) + int64(len(sp.mem)) + sp.size
	return asl.Header{Size: uint64(n), Tag: asl.TagPELTraceDAG1, HasTag: true}
}

// Open returns a reader of the TraceBytes. Readers opened one after the
// other each read the whole; they must not be used at the same time.
func (sp *Spooled) Open() io.Reader {
	rs := []io.Reader{bytes.NewReader(sp.header), bytes.NewReader(sp.mem)}
	if sp.file != nil {
		rs = append(rs, io.NewSectionReader(sp.file, 0, sp.size))
	}
	return io.MultiReader(rs...)
}

// Artifact reads the trace artifact into memory; limit bounds its size.
func (sp *Spooled) Artifact(limit uint64) (asl.Artifact, error) {
	hdr := sp.Header()
	if hdr.Size > limit {
		return asl.Artifact{}, fmt.Errorf("trace: %d bytes, above the in-memory limit of %d: %w", hdr.Size, limit, asl.ErrTooLarge)
	}
	b := make([]byte, 0, hdr.Size)
	b = append(append(b, sp.header...), sp.mem...)
	if sp.file != nil {
		b = b[:hdr.Size]
		if n, err := sp.file.ReadAt(b[len(sp.header)+len(sp.mem):], 0); int64(n) != sp.size {
			return asl.Artifact{}, fmt.Errorf("trace: reading the spool: %w", err)
		}
	}
	return asl.Tagged(asl.TagPELTraceDAG1, b), nil
}

// Close removes the temporary file, if any.
func (sp *Spooled) Close() error {
	if sp.file == nil {
		return nil
	}
	f := sp.file
	sp.file = nil
	return removeSpool(f)
}
