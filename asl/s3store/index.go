package s3store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

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
	refs := []asl.Reference{}
	if len(arts) > 0 {
		var err error
		if refs, err = s.PutBatch(ctx, id, arts); err != nil {
			return nil, err
		}
	} else if err := s.check(); err != nil {
		return nil, err
	}
	last := make(map[string]int, len(entries))
	for i, e := range entries {
		last[s.IndexKey(e.Space, e.Key)] = i
	}
	var todo []int
	for i, e := range entries {
		if last[s.IndexKey(e.Space, e.Key)] == i {
			todo = append(todo, i)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(todo))
	s.parallel(len(todo), func(j int) {
		if err := ctx.Err(); err != nil {
			errs[j] = err
			return
		}
		e := entries[todo[j]]
		key := s.IndexKey(e.Space, e.Key)
		po := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
		withChecksum(&po, e.Value, "")
		_, err := s.core.Client.PutObject(ctx, s.bucket, key, bytes.NewReader(e.Value), int64(len(e.Value)), po)
		if err != nil {
			errs[j] = s.errorf("put index entry", key, asl.Reference{}, err)
			cancel()
		}
	})
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return refs, nil
}

// LookupIndex implements asl.Indexer with one GET.
func (s *Store) LookupIndex(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	if err := checkSpace(space); err != nil {
		return nil, false, err
	}
	if err := s.check(); err != nil {
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
	body, info, _, err := s.core.GetObject(ctx, s.bucket, okey, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.errorf("read index entry", okey, asl.Reference{}, err)
	}
	defer body.Close()
	if info.Size > maxIndexValue {
		return nil, fmt.Errorf("s3store: read index entry s3://%s/%s: %d bytes, above the limit of %d: %w", s.bucket, okey, info.Size, maxIndexValue, asl.ErrIntegrity)
	}
	v, err := io.ReadAll(body)
	if err != nil {
		return nil, s.errorf("read index entry", okey, asl.Reference{}, err)
	}
	if info.Size >= 0 && int64(len(v)) != info.Size {
		return nil, fmt.Errorf("s3store: read index entry s3://%s/%s: %d of %d bytes: %w", s.bucket, okey, len(v), info.Size, asl.ErrIntegrity)
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
	return flush()
}
