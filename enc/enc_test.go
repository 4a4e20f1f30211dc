package enc

import (
	"errors"
	"testing"
)

func TestWriterReaderRoundTrip(t *testing.T) {
	var w Writer
	w.U8(0xab)
	w.U16(0x0102)
	w.U32(0x03040506)
	w.U64(0x0708090a0b0c0d0e)
	w.Bytes32([]byte("xy"))
	w.Bytes64([]byte("z"))
	r := NewReader(w.Buf)
	if v := r.U8("a"); v != 0xab {
		t.Fatalf("U8 = %x", v)
	}
	if v := r.U16("b"); v != 0x0102 {
		t.Fatalf("U16 = %x", v)
	}
	if v := r.U32("c"); v != 0x03040506 {
		t.Fatalf("U32 = %x", v)
	}
	if v := r.U64("d"); v != 0x0708090a0b0c0d0e {
		t.Fatalf("U64 = %x", v)
	}
	if v := r.Bytes32("e"); string(v) != "xy" {
		t.Fatalf("Bytes32 = %q", v)
	}
	if v := r.Bytes64("f"); string(v) != "z" {
		t.Fatalf("Bytes64 = %q", v)
	}
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
}

func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		read   func(r *Reader)
		field  string
		offset int
	}{
		{"short u32", []byte{1, 2}, func(r *Reader) { r.U32("n") }, "n", 0},
		{"bytes32 beyond end", []byte{0, 0, 0, 9, 1}, func(r *Reader) { r.Bytes32("s") }, "s", 0},
		{"bytes64 huge", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, func(r *Reader) { r.Bytes64("s") }, "s", 0},
		{"count too large", []byte{0xff, 0xff, 0xff, 0xff, 0}, func(r *Reader) { r.Count("nodes", 8) }, "nodes", 0},
		{"trailing", []byte{1, 2}, func(r *Reader) { r.U8("a") }, "end of input", 1},
		{"first error sticks", []byte{1}, func(r *Reader) { r.U16("first"); r.U8("second") }, "first", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			tt.read(r)
			err := r.Done()
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want a DecodeError", err)
			}
			if de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("got %s@%d, want %s@%d", de.Field, de.Offset, tt.field, tt.offset)
			}
		})
	}
}

func TestCountAcceptsWhatFits(t *testing.T) {
	r := NewReader([]byte{0, 0, 0, 2, 1, 2, 3, 4})
	if n := r.Count("items", 2); n != 2 || r.Err() != nil {
		t.Fatalf("Count = %d, %v", n, r.Err())
	}
}

func TestPrefixedReadsDoNotAllocate(t *testing.T) {
	var w Writer
	w.Bytes32([]byte("abc"))
	w.Bytes64([]byte("de"))
	allocs := testing.AllocsPerRun(100, func() {
		r := NewReader(w.Buf)
		r.Bytes32("a")
		r.Bytes64("b")
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	})
	if allocs > 1 { // the Reader itself may escape
		t.Fatalf("%v allocations per run, want at most 1", allocs)
	}
}
