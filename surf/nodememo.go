package surf

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
)

// NodeIndexSpace maps a node key (32 bytes) to the list<EncodedRef> of that
// node computation's outputs (SPECS.md §14.10).
const NodeIndexSpace = "surf.node"

const nodeKeyDomain = "AMDUAT/SURF-NODE-KEY/1"

// NodeKey derives the key of one node computation: SHA-256 of
//
//	domain bytes32 ("AMDUAT/SURF-NODE-KEY/1") || op_name bytes32 ||
//	op_version u32 || params bytes32 || list<input_ref EncodedRef> ||
//	global_params_ref OptionalEncodedRef || hash_id u16 || salt bytes32
//
// where the input and global params references are derived under hash and
// salt is the store's cache salt (§14.6), so a new salt disowns node entries
// as it disowns action cache entries.
func NodeKey(hash asl.HashID, op pel.OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact, salt []byte) [32]byte {
	refs := make([]asl.Reference, len(inputs))
	for i, in := range inputs {
		refs[i] = asl.MustDerive(hash, in)
	}
	var g *asl.Reference
	if global != nil {
		ref := asl.MustDerive(hash, *global)
		g = &ref
	}
	return nodeKey(hash, op, params, refs, g, salt)
}

// nodeKey is NodeKey from the references of the inputs and global params.
func nodeKey(hash asl.HashID, op pel.OperationID, params []byte, inputs []asl.Reference, global *asl.Reference, salt []byte) [32]byte {
	w := enc.Writer{}
	w.Bytes32([]byte(nodeKeyDomain))
	w.Bytes32([]byte(op.Name))
	w.U32(op.Version)
	w.Bytes32(params)
	w.U32(uint32(len(inputs)))
	for _, in := range inputs {
		w.Buf = asl.AppendEncodedRef(w.Buf, in)
	}
	if global != nil {
		w.Buf = asl.AppendOptionalEncodedRef(w.Buf, *global, true)
	} else {
		w.U8(0)
	}
	w.U16(uint16(hash))
	w.Bytes32(salt)
	return sha256.Sum256(w.Buf)
}

// nodeMemo is the store-backed pel.RopeMemo of one run. Lookup reads the
// index and verifies the outputs (each whole once, as the run's inputs
// are); Record stores the outputs (streamed when large) and then the index
// entry, each durably, so a killed run resumes from them. The first store
// error is kept in err and ends the run as an operational error; lookups
// after it miss and records are skipped.
type nodeMemo struct {
	ctx  context.Context
	s    *Surface
	ix   asl.Indexer
	salt []byte
	err  error
	hits int
	l    *loader
}

func (s *Surface) nodeMemo(ctx context.Context) *nodeMemo {
	ix, _ := s.store.(asl.Indexer)
	m := &nodeMemo{ctx: ctx, s: s, ix: ix, l: &loader{store: s.store}}
	if ix == nil {
		m.err = errors.New("node memoization needs a store with an index")
		return m
	}
	m.salt, m.err = Salt(ctx, s.store)
	return m
}

// key derives the node key, reading the inputs' references (cached in the
// ropes, derived already for the trace).
func (m *nodeMemo) key(op pel.OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope) ([32]byte, error) {
	h := m.s.opts.Hash
	refs := make([]asl.Reference, len(inputs))
	for i, in := range inputs {
		var err error
		if refs[i], err = in.Ref(m.ctx, h); err != nil {
			return [32]byte{}, err
		}
	}
	var g *asl.Reference
	if global != nil {
		ref, err := global.Ref(m.ctx, h)
		if err != nil {
			return [32]byte{}, err
		}
		g = &ref
	}
	return nodeKey(h, op, params, refs, g, m.salt), nil
}

func (m *nodeMemo) LookupRopes(op pel.OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope) ([]*asl.Rope, bool) {
	if m.err != nil {
		return nil, false
	}
	key, err := m.key(op, params, inputs, global)
	if err != nil {
		m.err = err
		return nil, false
	}
	v, found, err := m.ix.LookupIndex(m.ctx, NodeIndexSpace, key[:])
	if err != nil {
		m.err = err
		return nil, false
	}
	if !found {
		return nil, false
	}
	refs, err := readRefList(enc.NewReader(v), "outputs")
	if err != nil {
		return nil, false
	}
	outs := make([]*asl.Rope, len(refs))
	for i, ref := range refs {
		if outs[i], err = m.l.load(m.ctx, ref); err != nil {
			m.err = missOrError(err)
			return nil, false
		}
	}
	m.hits++
	return outs, true
}

func (m *nodeMemo) RecordRopes(op pel.OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope, outputs []*asl.Rope) {
	if m.err != nil {
		return
	}
	key, err := m.key(op, params, inputs, global)
	if err != nil {
		m.err = err
		return
	}
	refs := make([]asl.Reference, len(outputs))
	for i, out := range outputs {
		if refs[i], err = out.Ref(m.ctx, m.s.opts.Hash); err != nil {
			m.err = err
			return
		}
	}
	entry := []asl.IndexEntry{{Space: NodeIndexSpace, Key: key[:], Value: appendRefList(nil, refs)}}
	arts, small, err := smallOutputs(m.ctx, outputs)
	if err != nil {
		m.err = err
		return
	}
	if !small {
		// Streamed outputs first, each durable: the entry never names
		// absent outputs.
		var p Progress
		if m.err = m.s.streamOutputs(m.ctx, outputs, refs, &p, nil); m.err != nil {
			return
		}
	}
	// Small outputs and entry in one batch.
	_, m.err = m.ix.PutIndexed(m.ctx, m.s.opts.Hash, arts, entry)
}

// NodeOutputs decodes the value of a surf.node entry (SPECS.md §14.10):
// the list<EncodedRef> of the node's outputs. Garbage collection deletes
// an entry when one of them is gone.
func NodeOutputs(v []byte) ([]asl.Reference, error) {
	r := enc.NewReader(v)
	refs, err := readRefList(r, "outputs")
	if err != nil {
		return nil, err
	}
	if r.Remaining() != 0 {
		return nil, fmt.Errorf("node memo entry: %d trailing bytes", r.Remaining())
	}
	return refs, nil
}
