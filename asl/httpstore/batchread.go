package httpstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/amduat/amduat/asl"
)

var _ asl.BatchFetcher = (*Client)(nil)

// GetBatch implements asl.BatchFetcher over POST /v1/artifacts/batch-read
// (SPECS.md §18.4), in requests of at most the batch count. Every artifact
// is re-hashed under the reference it was asked for: one that does not
// match is asl.ErrIntegrity for that reference, never its bytes. An entry
// the server left out for its byte budget is fetched alone. A malformed
// answer is ErrProtocol and ends the batch.
func (c *Client) GetBatch(ctx context.Context, refs []asl.Reference, limit int64, fn func(i int, a asl.Artifact, err error) error) error {
	if limit <= 0 {
		limit = asl.DefaultGetLimit
	}
	for off := 0; off < len(refs); {
		chunk := refs[off:min(off+c.batchCount, len(refs))]
		if err := c.getChunk(ctx, chunk, off, limit, fn); err != nil {
			return err
		}
		off += len(chunk)
	}
	return nil
}

func (c *Client) getChunk(ctx context.Context, chunk []asl.Reference, off int, limit int64, fn func(i int, a asl.Artifact, err error) error) error {
	var checked []asl.Reference
	var early []error // entries refused before asking: unknown or zero refs
	for _, r := range chunk {
		err := checkRef(r)
		early = append(early, err)
		if err == nil {
			checked = append(checked, r)
		}
	}
	rq := &request{method: http.MethodPost, path: PathBatchRead, idempotent: true,
		header: http.Header{"Accept": {ContentTypeBatchRead}, "Content-Type": {ContentTypeJSON}}}
	body, err := jsonBody(RefsBody{Refs: asRefs(checked)})
	if err != nil {
		return err
	}
	rq.setBytes(body)
	resp, err := c.do(ctx, rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	shown := c.redact(rq.path, nil)
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	k := 0
	for j, ref := range chunk {
		if early[j] != nil {
			if err := fn(off+j, asl.Artifact{}, fmt.Errorf("get: %w", early[j])); err != nil {
				return err
			}
			continue
		}
		k++
		a, entryErr, err := readEntry(br, ref, limit)
		if err != nil {
			return fmt.Errorf("POST %s: entry %d (%s): %w", shown, k-1, ref, err)
		}
		if errors.Is(entryErr, errTooLargeForBatch) {
			a, entryErr = asl.Get(ctx, c, ref, limit)
			if entryErr != nil && !asl.IsContentError(entryErr) {
				return entryErr
			}
		}
		if err := fn(off+j, a, entryErr); err != nil {
			return err
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("POST %s: data after the %d entries asked for: %w", shown, k, ErrProtocol)
	}
	return nil
}

func asRefs(r []asl.Reference) []asl.Reference {
	if r == nil {
		return []asl.Reference{}
	}
	return r
}

var errTooLargeForBatch = errors.New("left out of the batch for its size")

// readEntry reads one batch-read entry for ref. entryErr concerns ref
// alone; err means the answer cannot be read further.
func readEntry(br *bufio.Reader, ref asl.Reference, limit int64) (a asl.Artifact, entryErr, err error) {
	status, err := br.ReadByte()
	if err != nil {
		return a, nil, fmt.Errorf("answer ends before its status: %w: %w", ErrProtocol, err)
	}
	switch status {
	case ReadNotFound:
		return a, fmt.Errorf("%s: %w", ref, asl.ErrNotFound), nil
	case ReadDamaged:
		return a, fmt.Errorf("%s: the server found it damaged: %w", ref, asl.ErrIntegrity), nil
	case ReadUnsupported:
		return a, fmt.Errorf("%s: %w", ref, asl.ErrUnsupported), nil
	case ReadTooLarge:
		return a, errTooLargeForBatch, nil
	case ReadPresent:
	default:
		return a, nil, fmt.Errorf("status byte 0x%02x: %w", status, ErrProtocol)
	}
	var lenb [4]byte
	if _, err := io.ReadFull(br, lenb[:]); err != nil {
		return a, nil, fmt.Errorf("answer ends inside frame_len: %w: %w", ErrProtocol, err)
	}
	flen := int64(binary.BigEndian.Uint32(lenb[:]))
	if flen < minFrame || flen-minFrame > limit {
		return a, nil, fmt.Errorf("frame_len %d outside [9, 9+%d]: %w", flen, limit, ErrProtocol)
	}
	buf := make([]byte, flen)
	if _, err := io.ReadFull(br, buf); err != nil {
		return a, nil, fmt.Errorf("answer ends inside a frame of %d bytes: %w: %w", flen, ErrProtocol, err)
	}
	a, err = asl.DecodeArtifact(buf)
	if err != nil {
		return a, nil, fmt.Errorf("frame: %v: %w", err, ErrProtocol)
	}
	if got, err := asl.Derive(ref.HashID(), a); err != nil || got != ref {
		return asl.Artifact{}, fmt.Errorf("%s: the server sent bytes that hash to %s: %w", ref, got, asl.ErrIntegrity), nil
	}
	return a, nil, nil
}
