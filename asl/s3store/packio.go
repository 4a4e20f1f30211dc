package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// errPackGone: the pack object an index names is not in the bucket (a
// collection removed it after this process read its index).
var errPackGone = errors.New("pack object gone")

// putPacks writes recs and entries as packs of at most PartSize bytes of
// records each (SPECS.md §6.7, "Writing packs"). Each pack object is PUT
// before its index object, both with If-None-Match: *, so no index names
// a pack that is not stored. When there are several packs, the entries go
// in an index of their own written after every pack is acknowledged, so
// no entry is durable before the artifacts of its call (§6.5). putPacks
// returns once every object is acknowledged.
func (s *Store) putPacks(ctx context.Context, recs []packRecord, entries []asl.IndexEntry) error {
	groups := groupRecords(recs, s.opts.PartSize)
	var ents []packEntry
	if len(entries) > 0 {
		stamp := s.packs.stamp()
		ents = make([]packEntry, len(entries))
		for i, e := range entries {
			ents[i] = packEntry{Stamp: stamp, Space: e.Space, Key: e.Key, Value: e.Value}
		}
	}
	if len(groups) == 1 {
		return s.writePack(ctx, groups[0], ents)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(groups))
	s.parallel(len(groups), func(i int) {
		if errs[i] = ctx.Err(); errs[i] == nil {
			if errs[i] = s.writePack(ctx, groups[i], nil); errs[i] != nil {
				cancel()
			}
		}
	})
	if err := firstErr(errs); err != nil {
		return err
	}
	if len(ents) > 0 {
		return s.writePack(ctx, nil, ents)
	}
	return nil
}

// firstErr is the first error that is not a cancellation caused by
// another, else the first one.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// writePack writes one pack (none for entries only) and its index object.
func (s *Store) writePack(ctx context.Context, recs []packRecord, ents []packEntry) error {
	pack, index, x := buildPack(recs, ents)
	stamp := s.packs.stamp()
	isum := sha256.Sum256(index)
	sum := isum // an index of entries only is named by its own hash
	if pack != nil {
		sum = sha256.Sum256(pack)
	}
	name := packName(stamp, sum)
	if pack != nil {
		if err := s.putImmutable(ctx, s.PackKey(name), pack, hex.EncodeToString(sum[:])); err != nil {
			return err
		}
	}
	if err := s.putImmutable(ctx, s.PackIndexKey(name), index, hex.EncodeToString(isum[:])); err != nil {
		return err
	}
	s.packs.merge(&packMeta{name: name, time: stamp, mod: time.Now()}, x)
	for _, r := range recs {
		if r.Stored == nil {
			s.remember(r.Ref, r.Hdr, r.Payload)
		}
	}
	return nil
}

// putImmutable PUTs b at key with If-None-Match: *, signed with its
// SHA-256 (the object store checks the body against it); a 412 means the
// same bytes are stored already (the key names their hash).
func (s *Store) putImmutable(ctx context.Context, key string, b []byte, sha string) error {
	po := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true, DisableMultipart: true}
	withChecksum(&po, b, sha)
	po.SetMatchETagExcept("*")
	var err error
	for attempt := range 6 {
		_, err = s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), "", sha, po)
		if err == nil || alreadyExists(err) {
			return nil
		}
		if code(err) != "ConditionalRequestConflict" {
			break
		}
		if err := sleepCtx(ctx, attempt); err != nil {
			return err
		}
	}
	return s.errorf("put", key, asl.Reference{}, err)
}

// fetchPacked reads the record of l with one ranged GET and verifies its
// payload under ref before returning any byte (records are at most the
// part size). A pack object that is gone is errPackGone.
func (s *Store) fetchPacked(ctx context.Context, ref asl.Reference, l artLoc) (io.ReadCloser, asl.Header, error) {
	b, err := s.readRecord(ctx, ref, l)
	if err != nil {
		return nil, asl.Header{}, err
	}
	return io.NopCloser(bytes.NewReader(b)), l.a.Hdr, nil
}

// readRecord is the verified payload of l.
func (s *Store) readRecord(ctx context.Context, ref asl.Reference, l artLoc) ([]byte, error) {
	raw, err := s.readStored(ctx, ref, l)
	if err != nil {
		return nil, err
	}
	out, err := decodeRecord(l, raw)
	if err != nil {
		return nil, fmt.Errorf("s3store: fetch s3://%s/%s bytes %d+%d: %w", s.bucket, s.PackKey(l.p.name), l.a.Off, l.a.Stored, err)
	}
	s.remember(ref, l.a.Hdr, out)
	return out, nil
}

// readStored is the record of l as stored (not verified).
func (s *Store) readStored(ctx context.Context, ref asl.Reference, l artLoc) ([]byte, error) {
	if l.a.Stored == 0 {
		return []byte{}, nil
	}
	key := s.PackKey(l.p.name)
	b, _, err := s.getRange(ctx, key, int64(l.a.Off), int64(l.a.Stored))
	if errors.Is(err, asl.ErrNotFound) {
		return nil, fmt.Errorf("s3store: fetch %s: s3://%s/%s: %w", ref, s.bucket, key, errPackGone)
	}
	if err != nil {
		return nil, fmt.Errorf("s3store: fetch %s: %w", ref, err)
	}
	return b, nil
}

// statPacked confirms with one HEAD that the pack holding l is stored and
// reports the artifact from its index.
func (s *Store) statPacked(ctx context.Context, ref asl.Reference, l artLoc) (asl.Info, error) {
	if l.p.len > 0 {
		key := s.PackKey(l.p.name)
		info, err := s.core.Client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		if err != nil {
			if code(err) == "NoSuchKey" {
				return asl.Info{}, errPackGone
			}
			return asl.Info{}, s.errorf("stat", key, ref, err)
		}
		if uint64(info.Size) != l.p.len {
			return asl.Info{}, fmt.Errorf("s3store: stat s3://%s/%s (%s): pack is %d bytes, its index says %d: %w", s.bucket, key, ref, info.Size, l.p.len, asl.ErrIntegrity)
		}
	}
	comp := "none"
	if l.a.Codec == codecZstd {
		comp = "zstd"
	}
	return asl.Info{Ref: ref, Header: l.a.Hdr, StoredSize: int64(l.a.Stored), Compression: comp}, nil
}

// packedOrLoose is the order every read of one artifact follows (SPECS.md
// §6.7, "Reading"): the packed copy this process knows, else the loose
// object, else, on ErrNotFound, the packed copy after learning the packs
// written since.
func packedOrLoose[T any](s *Store, ctx context.Context, ref asl.Reference, packed func(artLoc) (T, error), loose func() (T, error)) (T, error) {
	if v, found, err := packedOp(s, ctx, ref, false, packed); found {
		return v, err
	}
	v, err := loose()
	if !errors.Is(err, asl.ErrNotFound) || errors.Is(err, asl.ErrIntegrity) {
		return v, err
	}
	if pv, found, perr := packedOp(s, ctx, ref, true, packed); found || perr != nil {
		return pv, perr
	}
	var zero T
	return zero, err
}

// packedOp runs op on the packed copy of ref when this process knows one
// (without a request: a process that has not listed the packs yet knows
// none); when the pack is gone it forgets the pack and learns the packs
// written since. Otherwise (found false) the caller reads the loose
// object, and on ErrNotFound calls again with refreshed set, which first
// learns the packs written since this process last listed them.
func packedOp[T any](s *Store, ctx context.Context, ref asl.Reference, refreshed bool, op func(artLoc) (T, error)) (v T, found bool, err error) {
	if refreshed {
		if err := s.refreshPacks(ctx); err != nil {
			return v, true, err
		}
	}
	for range 2 {
		l, ok := s.packs.lookup(ref)
		if !ok {
			return v, false, nil
		}
		v, err = op(l)
		if !errors.Is(err, errPackGone) {
			return v, true, err
		}
		// Removed by a collection, which wrote what it kept into newer
		// packs first: learn them.
		s.packs.forget(l.p)
		if err := s.refreshPacks(ctx); err != nil {
			return v, true, err
		}
	}
	return v, false, nil
}
