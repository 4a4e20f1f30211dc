package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// The testee protocol amduat-testee/1 (SPECS.md §21): the runner and a
// testee exchange frames on the testee's stdin and stdout. A frame is a
// 4-byte big-endian length N (1 <= N <= MaxFrame) followed by N bytes of
// one JSON object in UTF-8. The runner sends one request and waits for its
// answer before sending the next; the testee answers every request, in
// order, and exits 0 when its stdin ends.

// TesteeProtocol is the protocol name exchanged in the hello request.
const TesteeProtocol = "amduat-testee/1"

// MaxFrame bounds a frame's payload (64 MiB): a longer length prefix is a
// protocol error, refused before any allocation.
const MaxFrame = 64 << 20

// KindHello is the first request of a session.
const KindHello = "hello"

// TesteeRequest is one request: kind is a vector kind (or "hello"), input
// the vector's input member.
type TesteeRequest struct {
	ID    uint64          `json:"id"`
	Kind  string          `json:"kind"`
	Input json.RawMessage `json:"input"`
}

// TesteeResponse answers the request of the same id: output is the
// testee's expect member for the input, or error says why the testee could
// not answer (counted as a failure).
type TesteeResponse struct {
	ID     uint64          `json:"id"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Hello is the output of the hello request: what the testee implements.
// Kinds are the vector kinds it answers; Registries the exec_dag registries
// beyond the kernel it has ("kernel+test/1", "kernel+wasm/1"). A request of
// another kind or registry is never sent; its case is skipped.
type Hello struct {
	Protocol       string   `json:"protocol"`
	Implementation string   `json:"implementation"`
	Kinds          []string `json:"kinds"`
	Registries     []string `json:"registries"`
}

// ErrFrame reports a malformed frame.
var ErrFrame = errors.New("testee protocol: malformed frame")

// ReadFrame reads one frame's payload. io.EOF means the stream ended
// cleanly before a frame; a stream that ends inside a frame is
// io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxFrame {
		return nil, fmt.Errorf("%w: length %d (want 1..%d)", ErrFrame, n, MaxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: payload: %w", ErrFrame, err)
	}
	return buf, nil
}

// WriteFrame writes payload as one frame.
func WriteFrame(w io.Writer, payload []byte) error {
	if len(payload) == 0 || len(payload) > MaxFrame {
		return fmt.Errorf("%w: payload of %d bytes", ErrFrame, len(payload))
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// GoHello is the hello answer of the Go testee: every kind and registry.
func GoHello() Hello {
	return Hello{Protocol: TesteeProtocol, Implementation: "amduat-go", Kinds: SolverKinds(),
		Registries: []string{RegistryKernelTest, RegistryKernelWasm}}
}

// ServeTestee is the Go implementation as a testee: it answers frames from
// r on w until r ends (nil) or a frame is malformed (an error). Answers
// are computed by Solve.
func ServeTestee(ctx context.Context, r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		payload, err := ReadFrame(br)
		if err == io.EOF {
			return bw.Flush()
		}
		if err != nil {
			return err
		}
		var req TesteeRequest
		resp := TesteeResponse{}
		if err := decodeStrict(payload, &req); err != nil {
			resp.Error = "malformed request: " + err.Error()
		} else {
			resp.ID = req.ID
			var out any
			if req.Kind == KindHello {
				out = GoHello()
			} else {
				out, err = Solve(ctx, req.Kind, req.Input)
			}
			if err != nil {
				resp.Error = oneLine(err.Error())
			} else if resp.Output, err = MarshalJSON(out); err != nil {
				resp.Error = err.Error()
			}
		}
		b, err := MarshalJSON(resp)
		if err != nil {
			return err
		}
		if err := WriteFrame(bw, b); err != nil {
			return err
		}
		// Flush only when no further request is already buffered: one
		// write per burst, and never a deadlock with a runner that waits.
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// CanonicalJSON is the form in which answers are compared (§21.3): members
// whose value is null are dropped (absent and null are the same), object
// members are sorted by name, numbers are written as given without
// insignificant white space. Two answers match when their canonical forms
// are equal byte for byte.
func CanonicalJSON(data []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k, e := range x {
			if e != nil {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case json.Number:
		buf.WriteString(x.String())
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}
