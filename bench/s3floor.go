package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// s3Round is one round of requests an operation sends at once and must see
// answered before its next round: gets GETs of 1 KiB objects and puts
// PUTs of fresh 1 KiB objects.
type s3Round struct{ gets, puts int }

// The rounds an operation on an S3 store waits for, one after another
// (SPECS.md §6.7, "Requests per operation"):
var (
	// a NoCache surface run: the artifacts, then the index entries, which
	// are written only once the artifacts are acknowledged (§6.5); its one
	// GET (the salt) goes while the run computes.
	s3RunRounds = []s3Round{{puts: 4}, {puts: 8}}
	// the same requests in one round: what the run would wait for if its
	// entries did not wait for its artifacts.
	s3RunOneRound = oneRound(s3RunRounds)
	// an action-cache hit through a server that has read the salt: salt
	// and action entry, then result, trace and output (the entry names
	// them), then the run log's entry (§14.6, §19.7).
	s3HitRounds = []s3Round{{gets: 2}, {gets: 3}, {puts: 1}}
)

// oneRound is the requests of rounds sent in a single round.
func oneRound(rounds []s3Round) []s3Round {
	var r s3Round
	for _, x := range rounds {
		r.gets += x.gets
		r.puts += x.puts
	}
	return []s3Round{r}
}

// roundsText describes rounds as "4 PUT, then 8 PUT".
func roundsText(rounds []s3Round) string {
	var b bytes.Buffer
	for i, r := range rounds {
		if i > 0 {
			b.WriteString(", then ")
		}
		switch {
		case r.gets > 0 && r.puts > 0:
			fmt.Fprintf(&b, "%d GET and %d PUT", r.gets, r.puts)
		case r.gets > 0:
			fmt.Fprintf(&b, "%d GET", r.gets)
		default:
			fmt.Fprintf(&b, "%d PUT", r.puts)
		}
	}
	return b.String()
}

// s3Floor times, with the raw minio-go client on the bench's bucket, the
// rounds an operation cannot do without: each round's requests at once, the
// rounds one after another, samples times. Their p50 is the least an
// operation that sends those rounds can take on this machine's MinIO,
// whatever the store does around them. The objects go under floor/NAME/.
func s3Floor(ctx context.Context, cl *minio.Client, name string, rounds []s3Round, samples int) ([]time.Duration, error) {
	body := make([]byte, 1024)
	FillRandom(body, s3Seed, 77)
	maxGets := 0
	for _, r := range rounds {
		maxGets = max(maxGets, r.gets)
	}
	getKey := func(j int) string { return fmt.Sprintf("floor/%s/get/%d", name, j) }
	put := func(k string) error {
		_, err := cl.PutObject(ctx, "bench", k, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{DisableMultipart: true})
		return err
	}
	for j := range maxGets {
		if err := put(getKey(j)); err != nil {
			return nil, err
		}
	}
	get := func(k string) error {
		obj, err := cl.GetObject(ctx, "bench", k, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		n, err := io.Copy(io.Discard, obj)
		if err == nil && n != int64(len(body)) {
			err = fmt.Errorf("%s: %d bytes, want %d", k, n, len(body))
		}
		return err
	}
	ds := make([]time.Duration, 0, samples)
	for s := range samples {
		t := time.Now()
		for ri, r := range rounds {
			errs := make([]error, r.gets+r.puts)
			var wg sync.WaitGroup
			for j := range r.gets {
				wg.Go(func() { errs[j] = get(getKey(j)) })
			}
			for j := range r.puts {
				wg.Go(func() { errs[r.gets+j] = put(fmt.Sprintf("floor/%s/put/%d/%d/%d", name, s, ri, j)) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return nil, fmt.Errorf("floor of %s: %w", name, err)
				}
			}
		}
		ds = append(ds, time.Since(t))
	}
	return ds, nil
}
