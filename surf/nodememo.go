package surf

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

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
	w := enc.Writer{}
	w.Bytes32([]byte(nodeKeyDomain))
	w.Bytes32([]byte(op.Name))
	w.U32(op.Version)
	w.Bytes32(params)
	w.U32(uint32(len(inputs)))
	for _, in := range inputs {
		w.Buf = asl.AppendEncodedRef(w.Buf, asl.MustDerive(hash, in))
	}
	if global != nil {
		w.Buf = asl.AppendOptionalEncodedRef(w.Buf, asl.MustDerive(hash, *global), true)
	} else {
		w.U8(0)
	}
	w.U16(uint16(hash))
	w.Bytes32(salt)
	return sha256.Sum256(w.Buf)
}

// nodeMemo is the store-backed pel.NodeMemo of one run. Lookup reads the
// index and the outputs (verified); Record stores the outputs and the index
// entry durably, so a killed run resumes from them. The first store error is
// kept in err and ends the run as an operational error; lookups after it
// miss and records are skipped.
type nodeMemo struct {
	ctx  context.Context
	s    *Surface
	ix   asl.Indexer
	salt []byte
	err  error
	hits int
}

func (s *Surface) nodeMemo(ctx context.Context) *nodeMemo {
	ix, _ := s.store.(asl.Indexer)
	m := &nodeMemo{ctx: ctx, s: s, ix: ix}
	if ix == nil {
		m.err = errors.New("node memoization needs a store with an index")
		return m
	}
	m.salt, m.err = Salt(ctx, s.store)
	return m
}

func (m *nodeMemo) Lookup(op pel.OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact) ([]asl.Artifact, bool) {
	if m.err != nil {
		return nil, false
	}
	key := NodeKey(m.s.opts.Hash, op, params, inputs, global, m.salt)
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
	limit := m.s.opts.MaxArtifact
	if limit <= 0 {
		limit = asl.DefaultGetLimit
	}
	outs := make([]asl.Artifact, len(refs))
	for i, ref := range refs {
		a, err := m.fetch(ref, limit)
		if err != nil {
			if missOrError(err) != nil {
				m.err = err
			}
			return nil, false
		}
		if a == nil {
			return nil, false
		}
		outs[i] = *a
	}
	m.hits++
	return outs, true
}

// fetch reads one memoized output whole (verified). An output above the
// in-memory limit is a miss (nil, nil), not an error: the run without the
// memo holds it in memory and succeeds.
func (m *nodeMemo) fetch(ref asl.Reference, limit int64) (*asl.Artifact, error) {
	rc, hdr, err := m.s.store.Fetch(m.ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if hdr.Size > uint64(limit) {
		return nil, nil
	}
	b := make([]byte, hdr.Size)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, fmt.Errorf("node output %s: %w", ref, err)
	}
	return &asl.Artifact{Bytes: b, Tag: hdr.Tag, HasTag: hdr.HasTag}, nil
}

func (m *nodeMemo) Record(op pel.OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact, outputs []asl.Artifact) {
	if m.err != nil {
		return
	}
	key := NodeKey(m.s.opts.Hash, op, params, inputs, global, m.salt)
	refs := make([]asl.Reference, len(outputs))
	for i, out := range outputs {
		refs[i] = asl.MustDerive(m.s.opts.Hash, out)
	}
	// Outputs and entry in one batch: an entry never names absent outputs.
	_, m.err = m.ix.PutIndexed(m.ctx, m.s.opts.Hash, outputs,
		[]asl.IndexEntry{{Space: NodeIndexSpace, Key: key[:], Value: appendRefList(nil, refs)}})
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
