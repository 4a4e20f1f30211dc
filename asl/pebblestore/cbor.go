package pebblestore

import "encoding/binary"

// Hand-written codecs for the two records on every read and write path: the
// index record and the chunk header. They produce and accept exactly the RFC
// 8949 core deterministic encoding that encMode gives for these structs
// (SPECS.md §6.4), without reflection or allocation.
//
// The parsers are sound but need not be complete: whatever they accept is
// the canonical encoding of the values they return, so the general decoder
// (decodeCanonical) would accept it too and decode the same values. Input
// they do not accept goes to the general decoder, which decides and names
// the error; TestFastCodecsMatchCBOR and the fuzz targets hold both to this.

// appendUint appends v as a CBOR unsigned integer (major type 0) in its
// shortest form.
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v < 24:
		return append(dst, byte(v))
	case v <= 0xff:
		return append(dst, 0x18, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 0x19), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, 0x1a), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(dst, 0x1b), v)
	}
}

// readUint reads a CBOR unsigned integer in its shortest form from the start
// of b and returns it with its encoded length; ok is false for anything
// else (another major type, a non-shortest form, truncation).
func readUint(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch ib := b[0]; {
	case ib < 24:
		return uint64(ib), 1, true
	case ib == 0x18 && len(b) >= 2:
		v = uint64(b[1])
		return v, 2, v >= 24
	case ib == 0x19 && len(b) >= 3:
		v = uint64(binary.BigEndian.Uint16(b[1:]))
		return v, 3, v > 0xff
	case ib == 0x1a && len(b) >= 5:
		v = uint64(binary.BigEndian.Uint32(b[1:]))
		return v, 5, v > 0xffff
	case ib == 0x1b && len(b) >= 9:
		v = binary.BigEndian.Uint64(b[1:])
		return v, 9, v > 0xffffffff
	}
	return 0, 0, false
}

// appendIndexRecord appends the canonical encoding of r: a map of its
// present fields in ascending key order (tag only when set, blob, chunk,
// pack and offset only when non-zero, as the struct's omitempty rules say).
func appendIndexRecord(dst []byte, r indexRecord) []byte {
	n := 3
	if r.Tag != nil {
		n++
	}
	if r.Blob != 0 {
		n++
	}
	if r.Chunk != 0 {
		n++
	}
	if r.Pack != 0 {
		n++
	}
	if r.Offset != 0 {
		n++
	}
	dst = append(dst, 0xa0+byte(n), 1)
	dst = appendUint(dst, r.Size)
	if r.Tag != nil {
		dst = appendUint(append(dst, 2), uint64(*r.Tag))
	}
	if r.Blob != 0 {
		dst = appendUint(append(dst, 3), r.Blob)
	}
	if r.Chunk != 0 {
		dst = appendUint(append(dst, 4), r.Chunk)
	}
	dst = appendUint(append(dst, 5), r.Stored)
	dst = appendUint(append(dst, 6), r.Compression)
	if r.Pack != 0 {
		dst = appendUint(append(dst, 7), r.Pack)
	}
	if r.Offset != 0 {
		dst = appendUint(append(dst, 8), r.Offset)
	}
	return dst
}

// appendChunkHeader appends the canonical encoding of h.
func appendChunkHeader(dst []byte, h chunkHeader) []byte {
	dst = appendUint(append(dst, 0xa3, 1), h.Codec)
	dst = appendUint(append(dst, 2), h.Raw)
	return appendUint(append(dst, 3), uint64(h.CRC))
}

// parseIndexRecord reads a canonically encoded index record from the start
// of b and returns it with the bytes after it.
func parseIndexRecord(b []byte) (r indexRecord, rest []byte, ok bool) {
	if len(b) == 0 || b[0] < 0xa3 || b[0] > 0xa7 {
		return indexRecord{}, nil, false
	}
	pairs := int(b[0] - 0xa0)
	b = b[1:]
	last, seen := uint64(0), 0
	for range pairs {
		if len(b) == 0 || b[0] <= byte(last) || b[0] > 8 {
			return indexRecord{}, nil, false
		}
		key := uint64(b[0])
		v, n, ok := readUint(b[1:])
		if !ok {
			return indexRecord{}, nil, false
		}
		switch key {
		case 1:
			r.Size = v
		case 2:
			if v > 0xffffffff {
				return indexRecord{}, nil, false
			}
			t := uint32(v)
			r.Tag = &t
		case 3:
			r.Blob = v
		case 4:
			r.Chunk = v
		case 5:
			r.Stored = v
		case 6:
			r.Compression = v
		case 7:
			r.Pack = v
		case 8:
			r.Offset = v
		}
		if (key == 3 || key == 4 || key == 7 || key == 8) && v == 0 {
			return indexRecord{}, nil, false // omitempty fields are never 0
		}
		last, seen = key, seen|1<<key
		b = b[1+n:]
	}
	if required := 1<<1 | 1<<5 | 1<<6; seen&required != required {
		return indexRecord{}, nil, false
	}
	return r, b, true
}

// parseChunkHeader reads a canonically encoded chunk header from the start
// of b and returns it with the bytes after it (the stored payload).
func parseChunkHeader(b []byte) (h chunkHeader, rest []byte, ok bool) {
	if len(b) < 7 || b[0] != 0xa3 || b[1] != 1 {
		return chunkHeader{}, nil, false
	}
	codec, n, ok := readUint(b[2:])
	if !ok {
		return chunkHeader{}, nil, false
	}
	b = b[2+n:]
	if len(b) == 0 || b[0] != 2 {
		return chunkHeader{}, nil, false
	}
	raw, n, ok := readUint(b[1:])
	if !ok {
		return chunkHeader{}, nil, false
	}
	b = b[1+n:]
	if len(b) == 0 || b[0] != 3 {
		return chunkHeader{}, nil, false
	}
	crc, n, ok := readUint(b[1:])
	if !ok || crc > 0xffffffff {
		return chunkHeader{}, nil, false
	}
	return chunkHeader{Codec: codec, Raw: raw, CRC: uint32(crc)}, b[1+n:], true
}
