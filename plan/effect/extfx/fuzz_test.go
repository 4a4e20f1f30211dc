package extfx

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// FuzzDecodeReply: the bytes an executor writes give frames or errors,
// never a panic, a hang or a line longer than the limit; a frame that
// validates re-encodes to a frame that validates the same way.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","protocol":"amduat-executor/1","name":"textfx","version":"1.0.0"}` + "\n",
		`{"type":"result","id":1,"outputs":[{"name":"count","data":"Mg=="}]}` + "\n",
		`{"type":"error","id":1,"class":"rate_limited","retry_after_ms":1500,"message":"slow down"}` + "\n",
		`{"type":"error","id":1,"class":"unknown_outcome"}` + "\n",
		`{"type":"result","id":1,"outputs":[{"name":"a","data":"!!"}]}` + "\n",
		`{"type":"result","id":1,"outputs":[{"name":"a"},{"name":"a"}]}` + "\n",
		`{"type":"call","id":1}` + "\n",
		"}{\n",
		"\n\n",
		`{"type":"hello"` + "\n",
		`{"type":"result","id":18446744073709551615}` + "\n",
		"\xff\xfe\n",
		`{"type":"result","id":1,"outputs":[` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1024
		r := bufio.NewReaderSize(bytes.NewReader(b), 16)
		for {
			line, err := ReadLine(r, limit)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrFrameTooLong) {
					var pe *ProtocolError
					if !errors.As(err, &pe) {
						t.Fatalf("ReadLine: unexpected error %v", err)
					}
				}
				return
			}
			if len(line) > limit {
				t.Fatalf("a line of %d bytes past the limit %d", len(line), limit)
			}
			fr, err := DecodeReply(line, 1)
			if err != nil {
				continue
			}
			again, err := json.Marshal(fr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeReply(again, 1); err != nil {
				t.Fatalf("re-encoded %s: %v", again, err)
			}
		}
	})
}
