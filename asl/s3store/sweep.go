package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// DefaultSweepAge is the age a part, staging object or multipart upload
// must exceed before Sweep removes it: longer than any put runs.
const DefaultSweepAge = 24 * time.Hour

// SweepReport says what Sweep found and removed.
type SweepReport struct {
	Manifests    int      `json:"manifests"`     // manifests read
	Parts        int      `json:"parts"`         // part objects listed
	Referenced   int      `json:"referenced"`    // parts a manifest names
	Young        int      `json:"young"`         // unnamed parts kept as younger than the age
	Removed      int      `json:"removed"`       // unnamed parts removed (or, dry run, to remove)
	RemovedBytes int64    `json:"removed_bytes"` // their bytes
	Staging      int      `json:"staging"`       // layout-1 staging objects and incomplete uploads removed
	Damaged      []string `json:"damaged"`       // artifact keys holding a damaged manifest
}

// Sweep removes what interrupted puts left (SPECS.md §6.7, "Leftovers"):
// part objects no manifest names and older than age, and staging objects
// under PREFIX tmp/ and incomplete multipart uploads under PREFIX (written
// by layout version 1) older than age. It lists the manifests first, then
// the parts: a put running meanwhile writes (or rewrites: part PUTs are
// unconditional) its parts after the put began, so they are younger than
// age as long as no put lasts longer than age. A damaged manifest is
// listed in the report and its parts, which no readable manifest names,
// are treated as unnamed. dryRun removes nothing.
func (s *Store) Sweep(ctx context.Context, age time.Duration, dryRun bool) (SweepReport, error) {
	rep := SweepReport{Damaged: []string{}}
	if err := s.check(); err != nil {
		return rep, err
	}
	cutoff := time.Now().Add(-age)
	named, err := s.namedParts(ctx, &rep)
	if err != nil {
		return rep, err
	}
	var doomed []minio.ObjectInfo
	for _, dir := range []string{"p/", "z/"} { // raw and compressed parts
		lo := minio.ListObjectsOptions{Prefix: s.prefix + dir, Recursive: true}
		for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
			if obj.Err != nil {
				return rep, s.errorf("sweep (list parts)", lo.Prefix, asl.Reference{}, obj.Err)
			}
			rep.Parts++
			switch {
			case named[obj.Key]:
				rep.Referenced++
			case !obj.LastModified.Before(cutoff):
				rep.Young++
			default:
				doomed = append(doomed, obj)
				rep.Removed++
				rep.RemovedBytes += obj.Size
			}
		}
	}
	lo := minio.ListObjectsOptions{Prefix: s.prefix + "tmp/", Recursive: true}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return rep, s.errorf("sweep (list staging)", lo.Prefix, asl.Reference{}, obj.Err)
		}
		if obj.LastModified.Before(cutoff) {
			doomed = append(doomed, obj)
			rep.Staging++
		}
	}
	var uploads []string
	for u := range s.core.Client.ListIncompleteUploads(ctx, s.bucket, s.prefix, true) {
		if u.Err != nil {
			return rep, s.errorf("sweep (list uploads)", s.prefix, asl.Reference{}, u.Err)
		}
		if u.Initiated.Before(cutoff) {
			uploads = append(uploads, u.Key)
			rep.Staging++
		}
	}
	if dryRun {
		return rep, nil
	}
	errs := make([]error, len(doomed)+len(uploads))
	s.parallel(len(doomed)+len(uploads), func(i int) {
		if i < len(doomed) {
			if err := s.core.Client.RemoveObject(ctx, s.bucket, doomed[i].Key, minio.RemoveObjectOptions{}); err != nil {
				errs[i] = s.errorf("sweep (remove)", doomed[i].Key, asl.Reference{}, err)
			}
			return
		}
		key := uploads[i-len(doomed)]
		if err := s.core.Client.RemoveIncompleteUpload(ctx, s.bucket, key); err != nil {
			errs[i] = s.errorf("sweep (abort upload)", key, asl.Reference{}, err)
		}
	})
	return rep, errors.Join(errs...)
}

// mayBeManifest says whether an artifact object of size bytes can be a
// manifest: 8 + 9 or 13 + 12 + 32n (version 1) or 33n (version 2)
// bytes, 1 <= n <= maxParts. Only those
// are read by Sweep.
func mayBeManifest(size int64) bool {
	for _, hl := range []int64{9, 13} {
		rest := size - 8 - hl - 12
		for _, per := range []int64{32, 33} { // manifest version 1, 2
			if rest >= per && rest%per == 0 && rest/per <= maxParts {
				return true
			}
		}
	}
	return false
}

// namedParts lists the artifact objects and reads each that may be a
// manifest, returning the hex digests of the parts the manifests name.
func (s *Store) namedParts(ctx context.Context, rep *SweepReport) (map[string]bool, error) {
	var keys []string
	lo := minio.ListObjectsOptions{Prefix: s.prefix + "a/", Recursive: true}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return nil, s.errorf("sweep (list artifacts)", lo.Prefix, asl.Reference{}, obj.Err)
		}
		if mayBeManifest(obj.Size) {
			keys = append(keys, obj.Key)
		}
	}
	ms := make([]*manifest, len(keys))
	errs := make([]error, len(keys))
	s.parallel(len(keys), func(i int) {
		ms[i], errs[i] = s.loadManifest(ctx, keys[i])
	})
	named := make(map[string]bool)
	for i, key := range keys {
		switch {
		case errors.Is(errs[i], asl.ErrIntegrity):
			rep.Damaged = append(rep.Damaged, fmt.Sprintf("s3://%s/%s: %v", s.bucket, key, errs[i]))
		case errors.Is(errs[i], asl.ErrNotFound):
		case errs[i] != nil:
			return nil, errs[i]
		case ms[i] != nil:
			rep.Manifests++
			for j := range ms[i].digests {
				named[s.partKeyOf(ms[i], j)] = true
			}
		}
	}
	sort.Strings(rep.Damaged)
	return named, nil
}

// loadManifest reads the object at key: nil when it holds ArtifactBytes,
// else its decoded manifest.
func (s *Store) loadManifest(ctx context.Context, key string) (*manifest, error) {
	body, _, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.errorf("sweep (read manifest)", key, asl.Reference{}, err)
	}
	defer body.Close()
	// The first byte tells: ArtifactBytes are not read further (and
	// nothing is allocated for them). A manifest is read up to the
	// longest one there can be, whatever size the listing claims (it may
	// be -1, unknown); a longer object fails decodeManifest.
	b := make([]byte, 8) // a compressed object's magic tells it from a manifest's
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, s.errorf("sweep (read manifest)", key, asl.Reference{}, err)
	}
	if !isManifest(b) {
		return nil, nil
	}
	rest, err := io.ReadAll(io.LimitReader(body, int64(manifestLen(asl.Header{HasTag: true}, maxParts, 2))))
	if err != nil {
		return nil, s.errorf("sweep (read manifest)", key, asl.Reference{}, err)
	}
	return decodeManifest(append(b, rest...))
}
