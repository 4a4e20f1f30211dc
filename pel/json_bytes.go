package pel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/amduat/amduat/opreg"
)

// ProgramBytesFromJSON is EncodeProgram(ProgramFromJSON(data, reg)), with
// the program's node and root counts, without holding the program (SPECS.md
// §14.11): a program whose nodes are listed in ascending id order, and
// which ProgramFromJSON accepts, is encoded node by node as the JSON is
// read, so the memory beyond data is about the ProgramBytes. Any other
// text (nodes out of order, or any error) takes ProgramFromJSON's path, so
// the bytes and the errors are always those of ProgramFromJSON.
func ProgramBytesFromJSON(data []byte, reg *opreg.Registry) (b []byte, nodes, roots int, err error) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	if json.Valid(data) {
		if b, nodes, roots, ok := programBytesInOrder(bytes.NewReader(data), len(data)/2, reg); ok {
			return b, nodes, roots, nil
		}
	}
	p, err := ProgramFromJSON(data, reg)
	if err != nil {
		return nil, 0, 0, err
	}
	if b, err = EncodeProgram(p); err != nil {
		return nil, 0, 0, fmt.Errorf("json program: %w", err)
	}
	return b, len(p.Nodes), len(p.Roots), nil
}

// ProgramBytesFromJSONReader is ProgramBytesFromJSON for the text r
// yields, without holding the text: ok is true when the program's nodes
// are in ascending id order and ProgramFromJSON would accept the text,
// with the same bytes. Otherwise (ok false) the caller reads the text
// whole and calls ProgramBytesFromJSON, which gives the bytes or the
// error; r may then have been read in part. sizeHint is the expected size
// of the ProgramBytes (0 if unknown).
func ProgramBytesFromJSONReader(r io.Reader, sizeHint int, reg *opreg.Registry) (b []byte, nodes, roots int, ok bool) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	return programBytesInOrder(r, sizeHint, reg)
}

// programBytesInOrder reads r as ProgramFromJSON does, one node at a
// time, and encodes each node as it is read. It gives up (ok false) at
// anything ProgramFromJSON might refuse or reorder: invalid JSON, a member
// that is not "nodes" or "roots" or that appears twice, a value that is not
// an array of objects, a node or root that opreg.StrictUnmarshal, the
// shape checks or the conversion refuse, or a node id not above the one
// before. Each node and root is checked by the same functions
// ProgramFromJSON applies to it, so what it accepts, ProgramFromJSON
// accepts with the same program.
func programBytesInOrder(r io.Reader, sizeHint int, reg *opreg.Registry) (b []byte, nodes, roots int, ok bool) {
	d := json.NewDecoder(r)
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, 0, 0, false
	}
	b = make([]byte, 4, 4+max(sizeHint, 0)) // node_count, filled in at the end
	var rootList []RootRef
	var prev NodeID
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey || seen[key] || key != "nodes" && key != "roots" {
			return nil, 0, 0, false
		}
		seen[key] = true
		if tok, err := d.Token(); err != nil || tok != json.Delim('[') {
			return nil, 0, 0, false
		}
		for k := 0; d.More(); k++ {
			var raw json.RawMessage
			if d.Decode(&raw) != nil || wantKind(raw, '{', "") != nil {
				return nil, 0, 0, false
			}
			if key == "roots" {
				var jr jsonRef
				if opreg.StrictUnmarshal(raw, &jr) != nil {
					return nil, 0, 0, false
				}
				r, err := rootFromJSON(k, jr)
				if err != nil {
					return nil, 0, 0, false
				}
				rootList = append(rootList, r)
				continue
			}
			var jn jsonNode
			if checkNodeShape(k, raw) != nil || opreg.StrictUnmarshal(raw, &jn) != nil {
				return nil, 0, 0, false
			}
			n, err := nodeFromJSON(k, &jn, reg)
			if err != nil || nodes > 0 && n.ID <= prev ||
				uint64(len(n.Params)) > math.MaxUint32 || nodes == math.MaxUint32 {
				return nil, 0, 0, false
			}
			b = appendNode(b, &n)
			prev = n.ID
			nodes++
		}
		if tok, err := d.Token(); err != nil || tok != json.Delim(']') {
			return nil, 0, 0, false
		}
	}
	if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
		return nil, 0, 0, false
	}
	// One JSON value and nothing after it (json.Valid for a reader).
	if _, err := d.Token(); err != io.EOF {
		return nil, 0, 0, false
	}
	binary.BigEndian.PutUint32(b, uint32(nodes))
	return appendRoots(b, rootList), nodes, len(rootList), true
}
