package conformance_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/amduat/amduat/conformance"
)

func frame(payload string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// FuzzServeTestee: whatever arrives on its stdin, the Go testee never
// panics or hangs; it answers every whole frame with one frame that is a
// JSON response of the request's id (or 0), and stops with an error only
// at a malformed frame (SPECS.md §21.1-§21.2).
func FuzzServeTestee(f *testing.F) {
	f.Add(frame(`{"id":0,"kind":"hello","input":{"protocol":"amduat-testee/1"}}`))
	f.Add(frame(`{"id":1,"kind":"reference_from_text","input":{"text":"0001"}}`))
	f.Add(frame(`{"id":2,"kind":"artifact_decode","input":{"artifact_bytes":"00000000000000000568656c6c6f"}}`))
	f.Add(frame(`{"id":3,"kind":"exec_dag","input":{"program":{"type_tag":257,"bytes":"0000000000000000"},"inputs":[],"params":null}}`))
	f.Add(frame(`{"id":4,"kind":"bundle_decode","input":{"bundle":"414d44554154424e"}}`))
	f.Add(frame(`{"id":5,"kind":"nope","input":{}}`))
	f.Add(frame(`not json`))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add(append(frame(`{"id":6,"kind":"hello","input":{}}`), 0, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		err := conformance.ServeTestee(context.Background(), bytes.NewReader(in), &out)
		if err != nil && !errors.Is(err, conformance.ErrFrame) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ServeTestee: %v", err)
		}
		for out.Len() > 0 {
			p, err := conformance.ReadFrame(&out)
			if err != nil {
				t.Fatalf("answer frame: %v", err)
			}
			var resp conformance.TesteeResponse
			if err := json.Unmarshal(p, &resp); err != nil || (resp.Error == "") == (len(resp.Output) == 0) {
				t.Fatalf("answer %s: %v", p, err)
			}
		}
	})
}
