package httpstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/amduat/amduat/asl"
)

// ErrIndexWrite is what PutIndexed wraps (with asl.ErrUnsupported): API v1
// has no route that writes index entries.
var ErrIndexWrite = errors.New("index writes happen on the server (run programs with POST /v1/pel/run)")

// PutIndexed implements asl.Indexer: it always fails with an error wrapping
// asl.ErrUnsupported. Index entries are derived data the server writes
// itself, beside the artifacts they derive from (SPECS.md §6.5); a client
// that could write them could point the action cache at any result.
func (c *Client) PutIndexed(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) ([]asl.Reference, error) {
	return nil, fmt.Errorf("put indexed: %w: %w", ErrIndexWrite, asl.ErrUnsupported)
}

func checkSpace(op, space string) error {
	if !ValidSpace(space) {
		return fmt.Errorf("%s: index space %q: HTTP API v1 names only spaces of 1 to 64 characters [a-z0-9._-]: %w", op, space, asl.ErrUnsupported)
	}
	return nil
}

// LookupIndex implements asl.Indexer over GET /v1/index/SPACE/KEYHEX; a 404
// with code ERR_NOT_FOUND is (nil, false, nil). The empty key, which has no
// path of its own, is looked up as the first entry of a scan. Index values
// are derived data (SPECS.md §6.5): the client cannot verify them, and
// consumers treat an entry naming a missing or non-matching artifact as
// absent.
func (c *Client) LookupIndex(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	if err := checkSpace("lookup index", space); err != nil {
		return nil, false, err
	}
	if len(key) == 0 {
		var (
			val   []byte
			found bool
		)
		errStop := errors.New("stop")
		err := c.scan(ctx, space, nil, 2, func(k, v []byte) error {
			if len(k) == 0 {
				val, found = v, true
			}
			return errStop
		})
		if err != nil && err != errStop {
			return nil, false, err
		}
		return val, found, nil
	}
	rq := &request{method: http.MethodGet, path: IndexKeyPath(space, key), idempotent: true,
		header: http.Header{"Accept": {ContentTypeJSON}}}
	var iv IndexValue
	if err := c.doJSON(ctx, rq, &iv); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == CodeNotFound {
			return nil, false, nil
		}
		return nil, false, err
	}
	v, err := hex.DecodeString(iv.Value)
	if err != nil {
		return nil, false, fmt.Errorf("GET %s: value %q is not hex: %w", c.redact(rq.path, nil), clip(iv.Value), ErrProtocol)
	}
	return v, true, nil
}

// ScanIndex implements asl.Indexer over GET
// /v1/index/SPACE?prefix=HEX&after=HEX&limit=N, a page of Options.PageSize
// at a time. Keys must carry prefix and ascend strictly (ErrProtocol
// otherwise).
func (c *Client) ScanIndex(ctx context.Context, space string, prefix []byte, fn func(key, value []byte) error) error {
	if err := checkSpace("scan index", space); err != nil {
		return err
	}
	return c.scan(ctx, space, prefix, c.pageSize, fn)
}

func (c *Client) scan(ctx context.Context, space string, prefix []byte, limit int, fn func(key, value []byte) error) error {
	var (
		after   []byte
		started bool // after is set (the empty key is a key)
	)
	for {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if len(prefix) > 0 {
			q.Set("prefix", hex.EncodeToString(prefix))
		}
		if started {
			q.Set("after", hex.EncodeToString(after))
		}
		rq := &request{method: http.MethodGet, path: PathIndex + space, query: q, idempotent: true,
			header: http.Header{"Accept": {ContentTypeJSON}}}
		var page IndexScan
		if err := c.doJSON(ctx, rq, &page); err != nil {
			return err
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("GET %s: %s: %w", c.redact(rq.path, q), fmt.Sprintf(format, a...), ErrProtocol)
		}
		if len(page.Entries) > limit {
			return bad("%d entries in a page of %d", len(page.Entries), limit)
		}
		for _, e := range page.Entries {
			k, err := hex.DecodeString(e.Key)
			if err != nil {
				return bad("key %q is not hex", clip(e.Key))
			}
			v, err := hex.DecodeString(e.Value)
			if err != nil {
				return bad("value %q is not hex", clip(e.Value))
			}
			if !bytes.HasPrefix(k, prefix) {
				return bad("key %x lacks the prefix %x", k, prefix)
			}
			if started && bytes.Compare(k, after) <= 0 {
				return bad("key %x listed after %x", k, after)
			}
			after, started = k, true
			if err := fn(k, v); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		next, err := hex.DecodeString(page.Next)
		if err != nil {
			return bad("next %q is not hex", clip(page.Next))
		}
		if started && bytes.Compare(next, after) < 0 || len(page.Entries) == 0 && started && bytes.Equal(next, after) {
			return bad("next %x does not advance past %x", next, after)
		}
		after, started = next, true
	}
}

// jsonBody encodes a request body.
func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	return b, nil
}
