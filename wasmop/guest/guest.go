//go:build wasip1

package guest

import (
	"fmt"
	"io"
	"unsafe"
)

//go:wasmimport amduat input_count
func hostInputCount() int32

//go:wasmimport amduat input_size
func hostInputSize(i int32) int64

//go:wasmimport amduat input_tag
func hostInputTag(i int32) int64

//go:wasmimport amduat input_read
func hostInputRead(i int32, off int64, ptr unsafe.Pointer, n int32) int32

//go:wasmimport amduat output_write
func hostOutputWrite(o int32, ptr unsafe.Pointer, n int32)

//go:wasmimport amduat set_error
func hostSetError(ptr unsafe.Pointer, n int32)

// InputCount is the number of data inputs.
func InputCount() int { return int(hostInputCount()) }

// InputSize is the payload length of data input i. An i outside
// 0..InputCount()-1 makes the host fail the call.
func InputSize(i int) int64 { return hostInputSize(int32(i)) }

// InputTag is the type tag of data input i; ok is false if it is untagged.
func InputTag(i int) (tag uint32, ok bool) {
	t := hostInputTag(int32(i))
	if t < 0 {
		return 0, false
	}
	return uint32(t), true
}

// maxRead bounds one input_read call (its length is an i32).
const maxRead = 1 << 30

// ReadAt reads len(p) bytes of data input i starting at offset off into p,
// with io.ReaderAt semantics: it returns io.EOF when fewer than len(p) bytes
// remain. Offsets below 0 give an error; offsets above the size make the
// host fail the call (SPECS.md §20), so ReadAt checks them first and
// returns io.EOF instead.
func ReadAt(i int, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("guest: read of input %d at negative offset %d", i, off)
	}
	size := InputSize(i)
	n := 0
	for n < len(p) {
		if off >= size {
			return n, io.EOF
		}
		chunk := p[n:]
		if len(chunk) > maxRead {
			chunk = chunk[:maxRead]
		}
		got := int(hostInputRead(int32(i), off, unsafe.Pointer(unsafe.SliceData(chunk)), int32(len(chunk))))
		if got == 0 {
			return n, io.EOF
		}
		n += got
		off += int64(got)
	}
	return n, nil
}

// Input returns the whole payload of data input i, copied into a new slice.
// For large inputs prefer Reader or ReadAt, which need no copy of the whole
// input.
func Input(i int) []byte {
	b := make([]byte, InputSize(i))
	n, _ := ReadAt(i, b, 0)
	return b[:n]
}

// Reader returns data input i as an io.SectionReader over the host's bytes
// (io.Reader, io.ReaderAt, io.Seeker; Size gives the length).
func Reader(i int) *io.SectionReader {
	return io.NewSectionReader(inputReaderAt(i), 0, InputSize(i))
}

// inputReaderAt is data input i as an io.ReaderAt.
type inputReaderAt int

func (r inputReaderAt) ReadAt(p []byte, off int64) (int, error) { return ReadAt(int(r), p, off) }

// Output returns an io.Writer appending to output o. Each Write is one host
// call; writing past the call's output bound makes the host fail the call.
// Wrap it in a bufio.Writer (and Flush) when writing many small pieces.
func Output(o int) io.Writer { return outputWriter(o) }

type outputWriter int

func (w outputWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		chunk := rest
		if len(chunk) > maxRead {
			chunk = chunk[:maxRead]
		}
		hostOutputWrite(int32(w), unsafe.Pointer(unsafe.SliceData(chunk)), int32(len(chunk)))
		rest = rest[len(chunk):]
	}
	return len(p), nil
}

// Run calls f and turns its result into the value the entry function
// returns: 0 if f returns nil; otherwise the failure code (see Fail,
// CodeError, CodePanic), after handing the message to the host.
func Run(f func() error) (status int32) {
	defer func() {
		if r := recover(); r != nil {
			setError(fmt.Sprintf("panic: %v", r))
			status = int32(CodePanic)
		}
	}()
	err := f()
	if err == nil {
		return 0
	}
	code, msg := errorCode(err)
	setError(msg)
	return int32(code)
}

func setError(msg string) {
	if msg == "" {
		return
	}
	b := []byte(msg)
	hostSetError(unsafe.Pointer(unsafe.SliceData(b)), int32(len(b)))
}
