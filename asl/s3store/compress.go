package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/zcodec"
)

// A compressed artifact object (SPECS.md §6.7, "Compression"): the
// artifact's payload compressed with zstd where it pays (zcodec, the
// embedded store's decision), behind a magic and the artifact's header:
//
//	magic   8       616d6473337a6101 ("amds3za", version 1)
//	header  9 or 13 the ArtifactBytes header: has_type_tag, [type_tag], bytes_len
//	frame   rest    one zstd frame, content size declared = bytes_len
//
// The object is no longer the ArtifactBytes; the reader decodes the frame
// and hashes the payload under the reference, as for any object.

var zMagic = [8]byte{'a', 'm', 'd', 's', '3', 'z', 'a', 1}

// zHeadMax is the longest fixed part of a compressed object.
const zHeadMax = 8 + 13

// isZObject says whether an object beginning with b is a compressed
// artifact object.
func isZObject(b []byte) bool { return len(b) >= 8 && bytes.Equal(b[:8], zMagic[:]) }

// encodeObject returns the object to store for the ArtifactBytes b of ref
// and the hex SHA-256 that signs its PUT: the compressed form when the
// payload is at least zcodec.DefaultMinSize and compressing saves an
// eighth (SPECS.md §6.4's rule), else b itself.
func encodeObject(ref asl.Reference, b []byte) ([]byte, string) {
	hdr, err := readHeader(bytes.NewReader(b))
	if err != nil {
		return b, bodySHA256(ref)
	}
	hl := headerLen(hdr)
	z, frame := zcodec.Compress(b[hl:], nil, zcodec.DefaultMinSize)
	if !z {
		return b, bodySHA256(ref)
	}
	obj := make([]byte, 0, 8+int(hl)+len(frame))
	obj = append(append(append(obj, zMagic[:]...), b[:hl]...), frame...)
	sum := sha256.Sum256(obj)
	return obj, hex.EncodeToString(sum[:])
}

// parseZHead reads the header of a compressed object from its first
// bytes.
func parseZHead(b []byte) (asl.Header, int, error) {
	if !isZObject(b) {
		return asl.Header{}, 0, fmt.Errorf("no compressed artifact object: %w", asl.ErrIntegrity)
	}
	hdr, err := readHeader(bytes.NewReader(b[8:]))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("compressed object ends inside its header: %w", asl.ErrIntegrity)
		}
		return asl.Header{}, 0, err
	}
	return hdr, 8 + int(headerLen(hdr)), nil
}

// maxZPayload bounds bytes_len of a compressed object: a writer compresses
// only what it puts whole (at most its part size).
const maxZPayload = 1 << 32

// decodeZObject decodes a whole compressed object: its header and payload.
// Anything but one frame that declares and decodes to exactly bytes_len
// bytes is asl.ErrIntegrity.
func decodeZObject(obj []byte) (asl.Header, []byte, error) {
	hdr, n, err := parseZHead(obj)
	if err != nil {
		return hdr, nil, err
	}
	if hdr.Size > maxZPayload {
		return hdr, nil, fmt.Errorf("compressed object says %d bytes, more than %d: %w", hdr.Size, uint64(maxZPayload), asl.ErrIntegrity)
	}
	payload, err := zcodec.DecodeExact(obj[n:], hdr.Size, nil)
	if err != nil {
		return hdr, nil, fmt.Errorf("compressed object: %v: %w", err, asl.ErrIntegrity)
	}
	return hdr, payload, nil
}

// fetchZ reads the rest of a compressed object (head read already, body
// the rest), decodes it and verifies the payload under ref before
// returning it (it is in memory: at most one part size, compressed and
// not).
func (s *Store) fetchZ(ref asl.Reference, key string, head []byte, body io.ReadCloser, size int64) (io.ReadCloser, asl.Header, error) {
	defer body.Close()
	obj := make([]byte, len(head), size)
	copy(obj, head)
	rest, err := io.ReadAll(io.LimitReader(body, size-int64(len(head))))
	if err != nil {
		return nil, asl.Header{}, s.errorf("fetch", key, ref, err)
	}
	obj = append(obj, rest...)
	if int64(len(obj)) != size {
		return nil, asl.Header{}, s.errorf("fetch", key, ref, io.ErrUnexpectedEOF)
	}
	hdr, payload, err := decodeZObject(obj)
	if err != nil {
		return nil, asl.Header{}, fmt.Errorf("s3store: fetch s3://%s/%s (%s): %w", s.bucket, key, ref, err)
	}
	vr, err := asl.VerifyReader(ref, hdr, bytes.NewReader(payload))
	if err != nil {
		return nil, asl.Header{}, err
	}
	if _, err := asl.ReadWhole(vr, hdr.Size); err != nil {
		return nil, asl.Header{}, fmt.Errorf("s3store: fetch s3://%s/%s: %w", s.bucket, key, err)
	}
	return io.NopCloser(bytes.NewReader(payload)), hdr, nil
}

// statZ is Stat of a compressed object from its first bytes and length.
func (s *Store) statZ(ref asl.Reference, key string, head []byte, total int64) (asl.Info, error) {
	hdr, n, err := parseZHead(head)
	if err != nil {
		return asl.Info{}, fmt.Errorf("s3store: stat s3://%s/%s (%s): %w", s.bucket, key, ref, err)
	}
	if total <= int64(n) {
		return asl.Info{}, fmt.Errorf("s3store: stat s3://%s/%s (%s): compressed object of %d bytes has no frame: %w", s.bucket, key, ref, total, asl.ErrIntegrity)
	}
	return asl.Info{Ref: ref, Header: hdr, StoredSize: total - int64(n), Compression: "zstd"}, nil
}

// ZPartKey is the object key of a compressed part whose raw bytes have
// SHA-256 digest d (SPECS.md §6.7, "Compression"): PREFIX z/DD/HEX. The
// object is one zstd frame declaring the part's length.
func (s *Store) ZPartKey(d [32]byte) string {
	h := hex.EncodeToString(d[:])
	return s.prefix + "z/" + h[:2] + "/" + h
}

// partKeyOf is the key of part i of m, by its codec.
func (s *Store) partKeyOf(m *manifest, i int) string {
	if m.codec(i) == codecZstd {
		return s.ZPartKey(m.digests[i])
	}
	return s.PartKey(m.digests[i])
}

// putPartCompressed writes one part, compressed under ZPartKey when it
// pays (zcodec), else raw under PartKey (putPart), and says which. Both
// PUTs are unconditional, as putPart's (SPECS.md §6.7, "Large
// artifacts").
func (s *Store) putPartCompressed(ctx context.Context, d [32]byte, b []byte) (uint8, error) {
	z, frame := zcodec.Compress(b, nil, zcodec.DefaultMinSize)
	if !z {
		return codecRaw, s.putPart(ctx, d, b)
	}
	key := s.ZPartKey(d)
	sum := sha256.Sum256(frame)
	po := minio.PutObjectOptions{ContentType: "application/zstd", DisableContentSha256: true}
	withChecksum(&po, frame, hex.EncodeToString(sum[:]))
	_, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(frame), int64(len(frame)), "", hex.EncodeToString(sum[:]), po)
	if err != nil {
		return codecZstd, s.errorf("put part", key, asl.Reference{}, err)
	}
	return codecZstd, nil
}

// openPartOf opens part i of m: a raw part streams (openPart); a
// compressed one is read whole (at most the part size) and decoded to
// exactly its length before any byte is returned (a frame that does not
// is asl.ErrIntegrity, as a resized raw part is).
func (s *Store) openPartOf(ctx context.Context, ref asl.Reference, m *manifest, i int) (io.ReadCloser, error) {
	n := m.partLen(i)
	if m.codec(i) == codecRaw {
		return s.openPart(ctx, ref, m.digests[i], n, i)
	}
	key := s.ZPartKey(m.digests[i])
	body, info, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		if code(err) == "NoSuchKey" {
			return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): part %d (s3://%s/%s) is missing: %w",
				s.bucket, s.ArtifactKey(ref), ref, i, s.bucket, key, asl.ErrIntegrity)
		}
		return nil, s.errorf(fmt.Sprintf("fetch part %d of %s", i, ref), key, asl.Reference{}, err)
	}
	defer body.Close()
	if info.Size <= 0 || info.Size > int64(n) {
		return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): compressed part %d (s3://%s/%s) is %d bytes for %d: %w",
			s.bucket, s.ArtifactKey(ref), ref, i, s.bucket, key, info.Size, n, asl.ErrIntegrity)
	}
	frame := make([]byte, info.Size)
	if _, err := io.ReadFull(body, frame); err != nil {
		return nil, s.errorf(fmt.Sprintf("fetch part %d of %s", i, ref), key, asl.Reference{}, err)
	}
	raw, err := zcodec.DecodeExact(frame, uint64(n), nil)
	if err != nil {
		return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): compressed part %d (s3://%s/%s): %v: %w",
			s.bucket, s.ArtifactKey(ref), ref, i, s.bucket, key, err, asl.ErrIntegrity)
	}
	return io.NopCloser(bytes.NewReader(raw)), nil
}
