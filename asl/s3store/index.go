package s3store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

func checkSpace(space string) error {
	if space == "" || strings.IndexByte(space, 0) >= 0 {
		return fmt.Errorf("s3store: index space %q: names are non-empty and hold no 0x00 byte (SPECS.md §6.5)", space)
	}
	return nil
}

// PutIndexed implements asl.Indexer (SPECS.md §6.5): the artifacts are
// put first (PutBatch), and only once every one is acknowledged are the
// entries written, one object each, Parallel at a time; so no entry is
// durable before the artifacts of its call. Of entries repeating a (space,
// key) the last one is written.
func (s *Store) PutIndexed(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) ([]asl.Reference, error) {
	if err := checkHash(id); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := checkSpace(e.Space); err != nil {
			return nil, err
		}
	}
	refs, err := s.putBatch(ctx, id, arts, entries)
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// looseIndex remembers, once per process, whether the bucket holds index
// entries of layout version 3 or before (one object each under PREFIX
// i/): a bucket created at version 4 has none, and a migrated one none
// left (SPECS.md §6.7, "Versions").
type looseIndex struct {
	mu      sync.Mutex
	checked bool
	present bool
}

func (s *Store) hasLooseEntries(ctx context.Context) (bool, error) {
	s.looseIx.mu.Lock()
	defer s.looseIx.mu.Unlock()
	if s.looseIx.checked {
		return s.looseIx.present, nil
	}
	lo := minio.ListObjectsOptions{Prefix: s.prefix + "i/", Recursive: true, MaxKeys: 1}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return false, s.errorf("list", lo.Prefix, asl.Reference{}, obj.Err)
		}
		s.looseIx.present = true
		break
	}
	s.looseIx.checked = true
	return s.looseIx.present, nil
}

// LookupIndex implements asl.Indexer: the index objects written since this
// process last looked are listed and read (refreshPacks: one LIST, shared
// by the lookups that arrive meanwhile), and the entry of the highest
// stamp answers; on a bucket that still holds loose entries, one GET of
// the entry's object answers what no pack holds.
func (s *Store) LookupIndex(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	if err := checkSpace(space); err != nil {
		return nil, false, err
	}
	if err := s.check(); err != nil {
		return nil, false, err
	}
	if err := s.refreshPacks(ctx); err != nil {
		return nil, false, err
	}
	if v, ok := s.packs.entry(space, key); ok {
		return v, true, nil
	}
	loose, err := s.hasLooseEntries(ctx)
	if err != nil || !loose {
		return nil, false, err
	}
	v, err := s.getValue(ctx, s.IndexKey(space, key))
	if errors.Is(err, asl.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

func (s *Store) getValue(ctx context.Context, okey string) ([]byte, error) {
	return s.getValueMax(ctx, okey, maxIndexValue, "read index entry")
}

// getValueMax reads the whole object okey, at most max bytes (a larger
// one, or one shorter than its length, is asl.ErrIntegrity).
func (s *Store) getValueMax(ctx context.Context, okey string, max int64, op string) ([]byte, error) {
	body, info, _, err := s.core.GetObject(ctx, s.bucket, okey, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.errorf(op, okey, asl.Reference{}, err)
	}
	defer body.Close()
	if info.Size > max {
		return nil, fmt.Errorf("s3store: %s s3://%s/%s: %d bytes, above the limit of %d: %w", op, s.bucket, okey, info.Size, max, asl.ErrIntegrity)
	}
	v, err := io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		return nil, s.errorf(op, okey, asl.Reference{}, err)
	}
	if info.Size >= 0 && int64(len(v)) != info.Size {
		return nil, fmt.Errorf("s3store: %s s3://%s/%s: %d of %d bytes: %w", op, s.bucket, okey, len(v), info.Size, asl.ErrIntegrity)
	}
	return v, nil
}

// ScanIndex implements asl.Indexer: ListObjectsV2 over the prefix's keys
// (hex preserves byte order, so the listing is in ascending key order) and
// a GET of each value, Parallel at a time.
func (s *Store) ScanIndex(ctx context.Context, space string, prefix []byte, fn func(key, value []byte) error) error {
	return s.ScanIndexAfter(ctx, space, prefix, nil, fn)
}

// ScanIndexAfter implements asl.IndexSeeker: the listing starts after the
// key of after (ListObjectsV2 StartAfter), so a resumed scan costs what it
// returns.
func (s *Store) ScanIndexAfter(ctx context.Context, space string, prefix, after []byte, fn func(key, value []byte) error) error {
	if err := checkSpace(space); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if err := s.refreshPacks(ctx); err != nil {
		return err
	}
	pkeys, pvals := s.packs.scanEntries(space, prefix, after)
	loose, err := s.hasLooseEntries(ctx)
	if err != nil {
		return err
	}
	// Packed entries merged with loose ones in key order; of a key in
	// both, the packed value (written later, by this layout) is the one.
	out := fn
	emitPacked := func() error {
		for len(pkeys) > 0 {
			if err := out(pkeys[0], pvals[0]); err != nil {
				return err
			}
			pkeys, pvals = pkeys[1:], pvals[1:]
		}
		return nil
	}
	if !loose {
		return emitPacked()
	}
	fn = func(k, v []byte) error {
		shadowed := false
		for len(pkeys) > 0 && bytes.Compare(pkeys[0], k) <= 0 {
			shadowed = shadowed || bytes.Equal(pkeys[0], k)
			if err := out(pkeys[0], pvals[0]); err != nil {
				return err
			}
			pkeys, pvals = pkeys[1:], pvals[1:]
		}
		if shadowed {
			return nil
		}
		return out(k, v)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base := s.indexPrefix(space)
	lo := minio.ListObjectsOptions{Prefix: base + hex.EncodeToString(prefix), Recursive: true}
	if after != nil {
		lo.StartAfter = base + hex.EncodeToString(after)
	}
	var keys [][]byte
	var okeys []string
	flush := func() error {
		vals := make([][]byte, len(okeys))
		errs := make([]error, len(okeys))
		s.parallel(len(okeys), func(i int) { vals[i], errs[i] = s.getValue(ctx, okeys[i]) })
		for i := range okeys {
			if errors.Is(errs[i], asl.ErrNotFound) {
				continue // removed between the listing and the read
			}
			if errs[i] != nil {
				return errs[i]
			}
			if err := fn(keys[i], vals[i]); err != nil {
				return err
			}
		}
		keys, okeys = keys[:0], okeys[:0]
		return nil
	}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return s.errorf("list", lo.Prefix, asl.Reference{}, obj.Err)
		}
		k, err := hex.DecodeString(strings.TrimPrefix(obj.Key, base))
		if err != nil || !strings.HasPrefix(obj.Key, base) {
			return fmt.Errorf("s3store: list s3://%s/%s: key is no index key: %w", s.bucket, obj.Key, asl.ErrIntegrity)
		}
		keys, okeys = append(keys, k), append(okeys, obj.Key)
		if len(okeys) == 256 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return emitPacked()
}
