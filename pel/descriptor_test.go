package pel_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
)

func TestSchemeDescriptorGolden(t *testing.T) {
	t.Parallel()
	a := pel.SchemeDescriptor()
	if !a.HasTag || a.Tag != pel.TagSchemeDescriptor || pel.TagSchemeDescriptor != 0x00000100 {
		t.Fatalf("descriptor tag %s", a.Header().TagString())
	}
	if got := asl.MustDerive(asl.HashSHA256, a); got != pel.SchemeRefDAG1 {
		t.Fatalf("SchemeRefDAG1 %s, derived %s", pel.SchemeRefDAG1, got)
	}
	checkGolden(t, "scheme_descriptor.txt", []byte(hex.EncodeToString(a.Bytes)+"\n"+pel.SchemeRefDAG1.String()+"\n"))
	d, err := pel.DecodeDescriptor(a.Bytes)
	if err != nil || d != pel.DescriptorDAG1 {
		t.Fatalf("decode %+v %v", d, err)
	}
}

func TestDecodeDescriptorRejects(t *testing.T) {
	t.Parallel()
	good := pel.EncodeDescriptor(pel.DescriptorDAG1)
	bad := bytes.Clone(good)
	bad[len(bad)-1] = 2
	tests := []struct {
		name   string
		b      []byte
		field  string
		offset int
	}{
		{"empty", nil, "descriptor_id length", 0},
		{"id past end", []byte{0, 0, 0, 9, 'P'}, "descriptor_id", 0},
		{"truncated", good[:len(good)-1], "global_params", len(good) - 1},
		{"flag 2", bad, "global_params", len(good) - 1},
		{"trailing", append(bytes.Clone(good), 0), "end of input", len(good)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pel.DecodeDescriptor(tt.b)
			var de *enc.DecodeError
			if !errors.As(err, &de) || de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("err %v; want %q at %d", err, tt.field, tt.offset)
			}
		})
	}
}

func FuzzDecodeDescriptor(f *testing.F) {
	f.Add(pel.EncodeDescriptor(pel.DescriptorDAG1))
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := pel.DecodeDescriptor(b)
		if err != nil {
			return
		}
		if back := pel.EncodeDescriptor(d); !bytes.Equal(back, b) {
			t.Fatalf("encode(decode(b)) = %x, want %x", back, b)
		}
	})
}
