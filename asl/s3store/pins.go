package s3store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// Pins on a bucket (SPECS.md §6.7, "Pins"): the pin NAME is the object
// PREFIX pins/n/NAMEESC holding the last change of that name (a pinRecord,
// JSON; a record whose new reference is empty is an unpinned name), and
// every change is also kept as PREFIX pins/log/NAMEESC/SEQ (SEQ the
// change's number for that name, 20 decimal digits). Changes are made with
// conditional writes on the pin object (If-None-Match: * to create it,
// If-Match: ETAG to change it): of two servers changing one name at once,
// one wins and the other re-reads and decides again, so no change is lost
// and Force is honoured against what is really stored.

var (
	_ asl.Pinner    = (*Store)(nil)
	_ asl.PinLogger = (*Store)(nil)
	_ asl.Deleter   = (*Store)(nil)
)

// pinRecord is the body of a pin object and of a log entry: one change.
type pinRecord struct {
	Seq      uint64 `json:"seq"`
	Name     string `json:"name"`
	Old      string `json:"old"`
	New      string `json:"new"`
	UnixNano int64  `json:"time_unix_nano"`
	Actor    string `json:"actor,omitempty"`
}

// CheckPinName refuses what no pin may be named: empty, longer than 255
// bytes, not UTF-8 or holding a control character (the rules of the
// embedded store, SPECS.md §19.8).
func CheckPinName(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("pin name %q: must be 1 to 255 bytes", name)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("pin name %q: not UTF-8", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("pin name %q: control character or invalid UTF-8", name)
		}
	}
	return nil
}

// PinKey is the object key of the pin name: PREFIX pins/n/NAMEESC, NAMEESC
// the name with every byte outside A-Z a-z 0-9 . _ - written %XX.
func (s *Store) PinKey(name string) string { return s.prefix + "pins/n/" + escapeSpace(name) }

func (s *Store) pinLogPrefix(name string) string {
	return s.prefix + "pins/log/" + escapeSpace(name) + "/"
}

func (s *Store) pinLogKey(name string, seq uint64) string {
	return fmt.Sprintf("%s%020d", s.pinLogPrefix(name), seq)
}

// maxPinRecord bounds a pin object read.
const maxPinRecord = 4096

func decodePinRecord(b []byte) (pinRecord, asl.PinChange, error) {
	var r pinRecord
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil || !atEOF(d) {
		return r, asl.PinChange{}, fmt.Errorf("not a pin record: %w", asl.ErrIntegrity)
	}
	c := asl.PinChange{Seq: r.Seq, Name: r.Name, UnixNano: r.UnixNano, Actor: r.Actor}
	for _, f := range []struct {
		hex string
		dst *asl.Reference
	}{{r.Old, &c.Old}, {r.New, &c.New}} {
		if f.hex == "" {
			continue
		}
		ref, err := asl.ParseReference(f.hex)
		if err != nil {
			return r, c, fmt.Errorf("pin record names %q: %w", f.hex, asl.ErrIntegrity)
		}
		*f.dst = ref
	}
	if r.Seq == 0 || CheckPinName(r.Name) != nil {
		return r, c, fmt.Errorf("pin record: seq %d, name %q: %w", r.Seq, r.Name, asl.ErrIntegrity)
	}
	return r, c, nil
}

func refHex(r asl.Reference) string {
	if r.IsZero() {
		return ""
	}
	return r.String()
}

// readSmall reads the whole object at key (at most max bytes); found is
// false for NoSuchKey.
func (s *Store) readSmall(ctx context.Context, key string, max int64) (b []byte, etag string, found bool, err error) {
	body, info, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		if code(err) == "NoSuchKey" {
			return nil, "", false, nil
		}
		return nil, "", false, s.errorf("read", key, asl.Reference{}, err)
	}
	defer body.Close()
	b, err = io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		return nil, "", false, s.errorf("read", key, asl.Reference{}, err)
	}
	if int64(len(b)) > max {
		return nil, "", false, fmt.Errorf("s3store: s3://%s/%s is longer than %d bytes: %w", s.bucket, key, max, asl.ErrIntegrity)
	}
	return b, info.ETag, true, nil
}

// putSmall writes b at key: ifNoneMatch creates it only if absent, else
// etag (when set) replaces only that version. A lost condition is
// reported as errPrecondition.
func (s *Store) putSmall(ctx context.Context, key string, b []byte, etag string, ifNoneMatch bool) error {
	po := minio.PutObjectOptions{ContentType: "application/json"}
	withChecksum(&po, b, "")
	switch {
	case ifNoneMatch:
		po.SetMatchETagExcept("*")
	case etag != "":
		po.SetMatchETag(etag)
	}
	_, err := s.core.Client.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), po)
	if err != nil {
		if alreadyExists(err) || code(err) == "ConditionalRequestConflict" {
			return errPrecondition
		}
		return s.errorf("write", key, asl.Reference{}, err)
	}
	return nil
}

var errPrecondition = errors.New("precondition failed")

// currentPin reads the pin object of name: its record (zero Seq when the
// name never was pinned) and ETag.
func (s *Store) currentPin(ctx context.Context, name string) (pinRecord, asl.PinChange, string, error) {
	key := s.PinKey(name)
	b, etag, found, err := s.readSmall(ctx, key, maxPinRecord)
	if err != nil || !found {
		return pinRecord{}, asl.PinChange{}, "", err
	}
	r, c, err := decodePinRecord(b)
	if err != nil {
		return r, c, "", fmt.Errorf("s3store: pin %q: s3://%s/%s: %w", name, s.bucket, key, err)
	}
	if r.Name != name {
		return r, c, "", fmt.Errorf("s3store: pin %q: s3://%s/%s names pin %q: %w", name, s.bucket, key, r.Name, asl.ErrIntegrity)
	}
	return r, c, etag, nil
}

// change moves name from what it names to ref (zero: unpin), with the
// conditional write described above. decide is given the current
// reference (zero when unpinned) and says whether to go on (false: done,
// nothing written) or fails.
func (s *Store) changePin(ctx context.Context, name string, ref asl.Reference, decide func(cur asl.Reference) (bool, error)) error {
	for attempt := 0; ; attempt++ {
		cur, curc, etag, err := s.currentPin(ctx, name)
		if err != nil {
			return err
		}
		if cur.Seq > 0 {
			// A writer that stopped between its pin write and its log
			// entry left the entry missing: write it now.
			if err := s.writePinLog(ctx, cur); err != nil {
				return err
			}
		}
		ok, err := decide(curc.New)
		if err != nil || !ok {
			return err
		}
		rec := pinRecord{Seq: cur.Seq + 1, Name: name, Old: cur.New, New: refHex(ref),
			UnixNano: time.Now().UnixNano(), Actor: asl.Actor(ctx)}
		b, _ := json.Marshal(rec)
		err = s.putSmall(ctx, s.PinKey(name), b, etag, cur.Seq == 0)
		if errors.Is(err, errPrecondition) {
			// Another server changed the pin meanwhile: decide again on
			// what it wrote.
			if err := sleepCtx(ctx, min(attempt, 5)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		return s.writePinLog(ctx, rec)
	}
}

// writePinLog writes the log entry of rec unless it is there.
func (s *Store) writePinLog(ctx context.Context, rec pinRecord) error {
	b, _ := json.Marshal(rec)
	err := s.putSmall(ctx, s.pinLogKey(rec.Name, rec.Seq), b, "", true)
	if errors.Is(err, errPrecondition) {
		return nil
	}
	return err
}

// Pin implements asl.Pinner (SPECS.md §6.7, "Pins"): ref must be stored
// (asl.ErrNotFound otherwise); a name that names another reference is
// re-pointed only with opts.Force (asl.ErrPinExists otherwise). After a
// collection with a short grace, or while one runs, Pin also checks ref's
// closure and keeps it from that collection's sweep; a member the
// collection removed fails the pin with asl.ErrNotFound and the name is
// restored (SPECS.md §6.7, "What a writer does"). Durable when it
// returns.
func (s *Store) Pin(ctx context.Context, name string, ref asl.Reference, opts asl.PinOptions) error {
	if err := CheckPinName(name); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.Stat(ctx, ref); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	g1, err := s.readGCState(ctx)
	if err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	var old asl.Reference
	changed := false
	err = s.changePin(ctx, name, ref, func(cur asl.Reference) (bool, error) {
		if cur == ref {
			return false, nil
		}
		if !cur.IsZero() && !opts.Force {
			return false, fmt.Errorf("pin %s: names %s already (re-point it with --force): %w", name, cur, asl.ErrPinExists)
		}
		old, changed = cur, true
		return true, nil
	})
	if err != nil {
		return err
	}
	if err := s.guardPin(ctx, g1, ref); err != nil {
		if changed {
			// Restore what the name named: the pin must not name what
			// a collection removed.
			_ = s.changePin(ctx, name, old, func(cur asl.Reference) (bool, error) { return cur == ref, nil })
		}
		return fmt.Errorf("pin %s: %w", name, err)
	}
	return nil
}

// Unpin implements asl.Pinner: the pin object is rewritten as a change to
// nothing (conditionally, as Pin), and the change logged.
func (s *Store) Unpin(ctx context.Context, name string) (bool, error) {
	if err := CheckPinName(name); err != nil {
		return false, err
	}
	if err := s.check(); err != nil {
		return false, err
	}
	existed := false
	err := s.changePin(ctx, name, asl.Reference{}, func(cur asl.Reference) (bool, error) {
		existed = !cur.IsZero()
		return existed, nil
	})
	return existed, err
}

// Pins implements asl.Pinner: one listing of PREFIX pins/n/ and one GET per
// pin object, in ascending name order. A damaged pin object is
// asl.ErrIntegrity naming it.
func (s *Store) Pins(ctx context.Context) ([]asl.Pin, error) {
	return s.PinsWithPrefix(ctx, "")
}

// PinsWithPrefix returns the pins whose names begin with prefix, in
// ascending name order: one listing of the pin objects under
// PinKey(prefix) and one GET per pin object listed, so its cost is what
// it returns, not every pin of the bucket (SPECS.md §24.3; the escaping
// of PinKey maps a prefix of a name to a prefix of its key).
func (s *Store) PinsWithPrefix(ctx context.Context, namePrefix string) ([]asl.Pin, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	prefix := s.PinKey(namePrefix)
	var keys []string
	lo := minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return nil, s.errorf("list pins", prefix, asl.Reference{}, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	recs := make([]asl.PinChange, len(keys))
	errs := make([]error, len(keys))
	s.parallel(len(keys), func(i int) {
		b, _, found, err := s.readSmall(ctx, keys[i], maxPinRecord)
		if err != nil || !found {
			errs[i] = err
			return
		}
		r, c, err := decodePinRecord(b)
		if err == nil && s.PinKey(r.Name) != keys[i] {
			err = fmt.Errorf("names pin %q: %w", r.Name, asl.ErrIntegrity)
		}
		if err != nil {
			errs[i] = fmt.Errorf("s3store: pins: s3://%s/%s: %w", s.bucket, keys[i], err)
		}
		recs[i] = c
	})
	var out []asl.Pin
	for i := range keys {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if !recs[i].New.IsZero() && strings.HasPrefix(recs[i].Name, namePrefix) {
			out = append(out, asl.Pin{Name: recs[i].Name, Ref: recs[i].New})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// PinLog implements asl.PinLogger: the changes of name in the order made
// (Seq ascending), or, for name "", of every name ordered by time, then
// name, then Seq. Time is the changing process's clock.
func (s *Store) PinLog(ctx context.Context, name string) ([]asl.PinChange, error) {
	if name != "" {
		if err := CheckPinName(name); err != nil {
			return nil, err
		}
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	prefix := s.prefix + "pins/log/"
	if name != "" {
		prefix = s.pinLogPrefix(name)
	}
	var keys []string
	lo := minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return nil, s.errorf("list pin log", prefix, asl.Reference{}, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	out := make([]asl.PinChange, len(keys))
	errs := make([]error, len(keys))
	s.parallel(len(keys), func(i int) {
		b, _, found, err := s.readSmall(ctx, keys[i], maxPinRecord)
		if err != nil || !found {
			errs[i] = err
			return
		}
		r, c, err := decodePinRecord(b)
		if err == nil && s.pinLogKey(r.Name, r.Seq) != keys[i] {
			err = fmt.Errorf("names pin %q change %d: %w", r.Name, r.Seq, asl.ErrIntegrity)
		}
		if err != nil {
			errs[i] = fmt.Errorf("s3store: pin log: s3://%s/%s: %w", s.bucket, keys[i], err)
		}
		out[i] = c
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if name != "" {
		// The change a stopped writer did not log yet is in the pin
		// object.
		_, c, _, err := s.currentPin(ctx, name)
		if err != nil {
			return nil, err
		}
		if c.Seq > 0 && (len(out) == 0 || out[len(out)-1].Seq < c.Seq) {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if name == "" && a.UnixNano != b.UnixNano {
			return a.UnixNano < b.UnixNano
		}
		if a.Name != b.Name {
			return strings.Compare(a.Name, b.Name) < 0
		}
		return a.Seq < b.Seq
	})
	return out, nil
}

// Delete implements asl.Deleter: one HEAD and one DELETE of each
// artifact's object, Parallel at a time. The parts of a large artifact
// stay until the sweep finds them named by no manifest (SPECS.md §6.7,
// "Leftovers"). Delete does not check what refers to refs.
func (s *Store) Delete(ctx context.Context, refs []asl.Reference) ([]bool, error) {
	for _, ref := range refs {
		if err := checkRef(ref); err != nil {
			return nil, fmt.Errorf("s3store: delete: %w", err)
		}
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	deleted := make([]bool, len(refs))
	errs := make([]error, len(refs))
	// A reference given twice is deleted (and reported) once, at its
	// first place.
	seen := map[asl.Reference]bool{}
	var todo []int
	for i, r := range refs {
		if !seen[r] {
			seen[r] = true
			todo = append(todo, i)
		}
	}
	s.parallel(len(todo), func(j int) {
		i := todo[j]
		key := s.ArtifactKey(refs[i])
		packed, err := s.deletePacked(ctx, refs[i])
		if err != nil {
			errs[i] = err
			return
		}
		deleted[i] = packed
		if _, err := s.core.Client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{}); err != nil {
			if code(err) != "NoSuchKey" {
				errs[i] = s.errorf("delete (stat)", key, refs[i], err)
			}
			return
		}
		if err := s.core.Client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
			errs[i] = s.errorf("delete", key, refs[i], err)
			return
		}
		deleted[i] = true
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return deleted, nil
}
